package chaos

import (
	"bytes"
	"strings"
	"testing"
)

// TestChaosStallSummary: the Markdown report's stall table gives the
// median and range of lost updates per stall rate and mode, and the late
// writes summed over the runs; the plot has one line per mode.
func TestChaosStallSummary(t *testing.T) {
	run := func(rate float64, mode string, lost int64, late, over int) Result {
		return Result{Topology: Single, Fault: "stall", Fencing: mode, StallRate: rate, WorkMs: 5,
			LostUpdates: lost, LateWrites: late, LateOverwritten: over, Pass: true}
	}
	rep := &Report{Profile: "test", Runs: []Result{
		run(0.001, "none", 31, 9, 7), run(0.001, "none", 10, 10, 10), run(0.001, "none", 52, 11, 7),
		run(0.01, "none", 268, 100, 80),
		run(0.001, "claim-first", 0, 0, 0),
	}}
	var md bytes.Buffer
	if err := WriteMarkdown(&md, rep, "plot.svg"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 0.1% | 5 ms | none | 3 | 31 (10-52) | 0 | 30 (24) |",
		"| 1% | 5 ms | none | 1 | 268 (268-268) | 0 | 100 (80) |",
		"| 0.1% | 5 ms | claim-first | 1 | 0 (0-0) | 0 | 0 (0) |",
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
	if n := strings.Count(svg.String(), "<polyline"); n != 2 {
		t.Errorf("the plot has %d lines, want one per mode (2)", n)
	}
}
