package chaos

import (
	"fmt"
	"io"
	"slices"
)

// publishedRow is one stall rate of the published experiment docs/chaos.md
// quotes (one Redis, 8 worker processes, 10,000 sections of read / 5 ms
// work / write, 200 ms TTL, stalls of 1.5 x TTL, 5 runs): lost updates
// without fencing, median and range.
type publishedRow struct {
	rate             float64
	median, min, max int64
}

var published = []publishedRow{
	{0.001, 42, 19, 44},
	{0.01, 310, 226, 385},
	{0.05, 1650, 1447, 1740},
}

// publishedRuns is how many runs the published medians come from; fewer
// runs here are compared but not judged.
const publishedRuns = 5

// PublishedTolerance is the factor within which a median here must land
// of the published one.
const PublishedTolerance = 1.5

// Comparison is one stall rate of the full profile without fencing next to
// the published figure.
type Comparison struct {
	StallRate       float64 `json:"stall_rate"`
	PollMs          int64   `json:"poll_ms,omitempty"` // the waiters polled (0: they waited in Lock)
	Runs            int     `json:"runs"`
	LostMedian      int64   `json:"lost_median"`
	LostMin         int64   `json:"lost_min"`
	LostMax         int64   `json:"lost_max"`
	PublishedMedian int64   `json:"published_median"`
	PublishedMin    int64   `json:"published_min"`
	PublishedMax    int64   `json:"published_max"`
	Ratio           float64 `json:"ratio"`   // median here / published median
	Verdict         string  `json:"verdict"` // ok, FAIL, or too few runs to judge
}

// Judged reports whether the comparison had enough runs to count.
func (c Comparison) Judged() bool { return c.Runs >= publishedRuns }

// compare puts the runs that repeat the published experiment (single
// Redis, no fencing, 8 workers, 10,000 sections, 5 ms work, 200 ms TTL)
// next to the published medians, one comparison per stall rate and way of
// waiting (Lock, or polling at one interval).
func compare(runs []Result) []Comparison {
	var polls []int64
	for _, r := range runs {
		if !slices.Contains(polls, r.PollMs) {
			polls = append(polls, r.PollMs)
		}
	}
	slices.Sort(polls)
	var out []Comparison
	for _, poll := range polls {
		for _, p := range published {
			if c, ok := compareRate(runs, p, poll); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

func compareRate(runs []Result, p publishedRow, poll int64) (Comparison, bool) {
	var lost []int64
	for _, r := range runs {
		if r.Topology == Single && r.Fault == stallFault && r.Fencing == "none" && r.StallRate == p.rate && r.PollMs == poll &&
			r.Workers == 8 && r.Accepted >= 10_000 && r.WorkMs == 5 && r.TTLms == quickTTL.Milliseconds() {
			lost = append(lost, r.LostUpdates)
		}
	}
	if len(lost) == 0 {
		return Comparison{}, false
	}
	slices.Sort(lost)
	c := Comparison{StallRate: p.rate, PollMs: poll, Runs: len(lost), LostMedian: lost[len(lost)/2], LostMin: lost[0],
		LostMax: lost[len(lost)-1], PublishedMedian: p.median, PublishedMin: p.min, PublishedMax: p.max}
	c.Ratio = float64(c.LostMedian) / float64(p.median)
	switch {
	case !c.Judged():
		c.Verdict = fmt.Sprintf("not judged: %d of %d runs", c.Runs, publishedRuns)
	case c.Ratio >= 1/PublishedTolerance && c.Ratio <= PublishedTolerance:
		c.Verdict = "ok"
	default:
		c.Verdict = "FAIL"
	}
	return c, true
}

// writeComparisons writes the comparison lines under the terminal table.
func writeComparisons(w io.Writer, cs []Comparison) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nLost updates without fencing against the published experiment (median over runs, within %gx):\n", PublishedTolerance)
	for _, c := range cs {
		fmt.Fprintf(w, "  stall %g%%, waiters %s: %d (%d-%d) in %d runs vs %d (%d-%d): %.2fx  %s\n", c.StallRate*100,
			waiters(c.PollMs), c.LostMedian, c.LostMin, c.LostMax, c.Runs, c.PublishedMedian, c.PublishedMin, c.PublishedMax, c.Ratio, c.Verdict)
	}
}
