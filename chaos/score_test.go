package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// TestScore: the counts come from the history, the fault window decides
// what was granted during the fault, and the workers' errors fill in a
// missing lock error.
func TestScore(t *testing.T) {
	ms := int64(time.Millisecond)
	sec := func(w int, got, end, deadline int64, o check.Outcome) check.Section {
		return check.Section{Worker: w, Call: got - ms, Got: got, End: end, Deadline: deadline, Release: end + ms, Outcome: o}
	}
	h := &history{
		sections: []check.Section{
			sec(0, 10*ms, 20*ms, 200*ms, check.OutcomeOK),
			sec(1, 30*ms, 40*ms, 220*ms, check.OutcomeRejected),
			sec(1, 50*ms, 60*ms, 240*ms, check.OutcomeOK),
			sec(2, 70*ms, 400*ms, 260*ms, check.OutcomeOK), // ran past its lease
			sec(0, 410*ms, 420*ms, 600*ms, check.OutcomeError),
		},
		final:  2,
		tokens: []uint64{1, 3, 2},
	}
	f := faultRecord{from: 25 * ms, to: 75 * ms, blocked: 150 * time.Millisecond, schedule: []string{"step"}}
	stats := []*workerStats{{Accepted: 1, Failures: 2}, nil, {Accepted: 0, Failures: 1, LastError: "no quorum", Polls: 4}}
	var r Result
	r.score(h, f, stats)
	for _, c := range []struct {
		name      string
		got, want int64
	}{
		{"sections", int64(r.Sections), 5},
		{"accepted", int64(r.Accepted), 3},
		{"rejected", int64(r.Rejected), 1},
		{"expected", r.Expected, 3},
		{"final", r.Final, 2},
		{"lost", r.LostUpdates, 1},
		{"late", int64(r.LateSections), 1},
		{"during fault", int64(r.DuringFault), 3},
		{"token inversions", int64(r.TokenInversions), 1},
		{"lock failures", int64(r.LockFailures), 3},
		{"polls", int64(r.Polls), 4},
		{"blocked ms", r.BlockedMs, 150},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if len(r.Late) != 1 || !strings.Contains(r.Late[0], "worker 2") || !strings.HasSuffix(r.Late[0], ", ok)") {
		t.Errorf("late = %q, want the one late section of worker 2, outcome ok", r.Late)
	}
	if r.Error != "no quorum" || len(r.Schedule) != 1 {
		t.Errorf("error %q, schedule %q; want the worker's error and the fault's note", r.Error, r.Schedule)
	}

	// A fault that never marked its window counts every section; its own
	// lock error wins over the workers'.
	r = Result{}
	r.score(h, faultRecord{errText: "timed out", errLat: 80 * time.Millisecond}, stats)
	if r.DuringFault != 5 || r.Error != "timed out" || r.ErrorLatencyMs != 80 {
		t.Errorf("unmarked window: during %d, error %q after %d ms; want 5, the fault's, 80", r.DuringFault, r.Error, r.ErrorLatencyMs)
	}
}
