package chaos

import (
	"fmt"
	"math"
	"time"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// score fills in the measures of r from the run's history, what its fault
// recorded, and the workers' final statistics (nil for a worker that
// left none, such as a crashed one).
func (r *Result) score(h *history, f faultRecord, stats []*workerStats) {
	ss := h.sections
	r.Final = h.final
	r.Sections = len(ss)
	r.Error, r.ErrorLatencyMs, r.Schedule = f.errText, f.errLat.Milliseconds(), f.schedule
	r.BlockedMs = f.blocked.Milliseconds()
	var late []string
	var accepted2 int64
	for _, s := range ss {
		switch {
		case s.Outcome == check.OutcomeOK && s.Row == 2:
			accepted2++
		case s.Outcome == check.OutcomeOK:
			r.Accepted++
		case s.Outcome == check.OutcomeRejected:
			r.Rejected++
		}
		if s.End > s.Deadline {
			r.LateSections++
			late = append(late, fmt.Sprintf("worker %d: section of %v on a lease valid for %v (lock call %v, token %d, %s)",
				s.Worker, ms(s.End-s.Got), ms(s.Deadline-s.Got), ms(s.Got-s.Call), s.Token, s.Outcome))
		}
		if f.from == 0 || (s.Got >= f.from && s.Got <= f.to) {
			r.DuringFault++
		}
	}
	if len(late) > 5 {
		late = append(late[:5], fmt.Sprintf("and %d more", len(late)-5))
	}
	r.Late = late
	r.Expected = int64(r.Accepted)
	r.LostUpdates = r.Expected - r.Final
	if accepted2 > 0 || h.final2 != 0 {
		r.Unfenced = &UnfencedRow{Accepted: accepted2, Final: h.final2, LostUpdates: accepted2 - h.final2}
	}
	r.Overlaps = check.Overlaps(ss)
	r.ValidOverlaps = check.ValidOverlaps(ss)
	r.GrantInversions = check.GrantInversions(ss)
	r.FaultCounts = f.counts
	r.StaleOverlaps = check.StaleOverlaps(ss)
	r.LateWrites, r.LateOverwritten = check.LateWrites(ss)
	r.ReadWriteShare = math.Round(check.ReadWriteShare(ss)*1000) / 1000
	r.TokenInversions = check.TokenInversions(h.tokens)
	r.Linearizable = check.Linearizable(ss, 20*time.Second)
	median, longest := check.LockWait(ss)
	r.WaitMedianMs, r.WaitMaxMs = ms(median).Milliseconds(), ms(longest).Milliseconds()
	for _, st := range stats {
		if st == nil {
			continue
		}
		r.LockFailures += st.Failures
		r.Polls += st.Polls
		r.SectionErrors += st.Errors
		if st.SectionError != "" {
			r.SectionError = st.SectionError
		}
		if r.Error == "" && st.LastError != "" && st.Accepted == 0 {
			r.Error = st.LastError
		}
	}
}

func ms(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
