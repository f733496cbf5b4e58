package chaos

import (
	"bytes"
	"strings"
	"testing"
)

// TestChaosStallSummary: the Markdown report's stall table gives the
// median and range of lost updates per stall rate, mode and way of
// waiting, the late writes summed over the runs, what a late write that
// landed between sections cost, and the median read-write share; the plot
// has one line per mode and way of waiting.
func TestChaosStallSummary(t *testing.T) {
	run := func(rate float64, mode string, lost int64, late, over int, share float64) Result {
		return Result{Topology: Single, Fault: "stall", Fencing: mode, StallRate: rate, WorkMs: 5,
			LostUpdates: lost, LateWrites: late, LateOverwritten: over, ReadWriteShare: share, Pass: true}
	}
	rep := &Report{Profile: "test", Runs: []Result{
		run(0.001, "none", 31, 9, 7, 0.85), run(0.001, "none", 10, 10, 10, 0.8), run(0.001, "none", 52, 11, 7, 0.83),
		run(0.01, "none", 268, 100, 80, 0.84),
		run(0.001, "claim-first", 0, 0, 0, 0.82),
	}}
	polled := run(0.001, "none", 41, 10, 2, 0.3)
	polled.PollMs = 100
	rep.Runs = append(rep.Runs, polled)
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep, "plot.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// (31+10+52 lost - 24 overwritten) / (30 late - 24) = 11.5
		"| 0.1% | 5 ms | none | Lock | 3 | 31 (10-52) | 0 | 30 (24) | 11.5 | 0.83 |",
		"| 1% | 5 ms | none | Lock | 1 | 268 (268-268) | 0 | 100 (80) | 9.4 | 0.84 |",
		"| 0.1% | 5 ms | claim-first | Lock | 1 | 0 (0-0) | 0 | 0 (0) | - | 0.82 |",
		"| 0.1% | 5 ms | none | poll 100 ms | 1 | 41 (41-41) | 0 | 10 (2) | 4.9 | 0.30 |",
		"![lost updates against the stall rate](plot.svg)",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, md.String())
		}
	}
	var svg bytes.Buffer
	if err := WriteSVG(&svg, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<polyline"); n != 3 {
		t.Errorf("the plot has %d lines, want one per mode and way of waiting (3)", n)
	}
	if !strings.Contains(svg.String(), ">none, 5 ms work, poll 100 ms</text>") {
		t.Errorf("the plot's legend does not name the polling line:\n%s", svg.String())
	}
}

// TestChaosPublishedComparison: only runs that repeat the published
// experiment are compared; a median within 1.5x passes, one outside fails,
// and fewer than five runs are shown but not judged.
func TestChaosPublishedComparison(t *testing.T) {
	run := func(rate float64, mode string, accepted int, lost int64) Result {
		return Result{Topology: Single, Fault: "stall", Fencing: mode, StallRate: rate, Workers: 8, WorkMs: 5,
			TTLms: 200, Accepted: accepted, LostUpdates: lost, Pass: true}
	}
	var runs []Result
	for _, l := range []int64{10, 31, 8, 52, 12} { // median 12: 0.29x of 42
		runs = append(runs, run(0.001, "none", 10_000, l))
	}
	for _, l := range []int64{268, 244, 370, 300, 250} { // median 268: 0.86x of 310
		runs = append(runs, run(0.01, "none", 10_000, l))
	}
	runs = append(runs,
		run(0.05, "none", 10_000, 1800),           // one run: not judged
		run(0.05, "claim-first", 10_000, 0),       // another mode
		run(0.05, "none", 240, 90),                // the quick profile's stall run
		Result{Topology: Single, Fault: "kill-1"}, // not a stall run
	)
	for _, l := range []int64{40, 35, 44, 52, 30} { // polling waiters: median 40, 0.95x of 42
		r := run(0.001, "none", 10_000, l)
		r.PollMs = 100
		runs = append(runs, r)
	}
	rep := &Report{Runs: runs, Comparisons: compare(runs)}
	if len(rep.Comparisons) != 4 {
		t.Fatalf("%d comparisons, want 4: %+v", len(rep.Comparisons), rep.Comparisons)
	}
	for i, want := range []struct {
		runs    int
		poll    int64
		median  int64
		verdict string
	}{{5, 0, 12, "FAIL"}, {5, 0, 268, "ok"}, {1, 0, 1800, "not judged: 1 of 5 runs"}, {5, 100, 40, "ok"}} {
		c := rep.Comparisons[i]
		if c.Runs != want.runs || c.PollMs != want.poll || c.LostMedian != want.median || c.Verdict != want.verdict {
			t.Errorf("comparison %d: %d runs, poll %d ms, median %d, %q; want %d, %d, %d, %q", i, c.Runs, c.PollMs, c.LostMedian, c.Verdict,
				want.runs, want.poll, want.median, want.verdict)
		}
	}
	if f := rep.FailedComparisons(); len(f) != 1 || f[0].StallRate != 0.001 || f[0].PollMs != 0 {
		t.Errorf("failed comparisons %+v, want the 0.1%% one", f)
	}
	var tbl bytes.Buffer
	if err := WriteTable(&tbl, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tbl.String(), "FAIL stall 0.1% without fencing (waiters: Lock): median 12 lost vs 42 published (0.29x") {
		t.Errorf("the table does not name the failed comparison:\n%s", tbl.String())
	}
}
