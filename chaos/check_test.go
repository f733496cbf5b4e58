package chaos

import (
	"testing"
	"time"
)

func TestChaosCheckers(t *testing.T) {
	sec := func(w int, got, end, deadline int64) Section {
		return Section{Worker: w, Call: got - 1, Got: got, End: end, Deadline: deadline, Release: end + 1, Outcome: "ok"}
	}
	for _, tc := range []struct {
		name            string
		ss              []Section
		overlaps, stale int
		linearizable    string
	}{
		{"sequential", []Section{sec(0, 10, 20, 100), sec(1, 30, 40, 120), sec(0, 50, 60, 140)}, 0, 0, "ok"},
		{"double grant", []Section{sec(0, 10, 50, 100), sec(1, 30, 40, 120)}, 1, 1, "violation"},
		// Worker 0 ran past its deadline (a frozen process): the
		// resource saw an overlap, the lock service did not grant two.
		{"stale holder", []Section{sec(0, 10, 80, 25), sec(1, 30, 40, 120)}, 0, 1, "ok"},
		{"same worker", []Section{sec(0, 10, 20, 100), sec(0, 15, 30, 100)}, 0, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Overlaps(tc.ss); got != tc.overlaps {
				t.Errorf("Overlaps = %d, want %d", got, tc.overlaps)
			}
			if got := StaleOverlaps(tc.ss); got != tc.stale {
				t.Errorf("StaleOverlaps = %d, want %d", got, tc.stale)
			}
			if tc.linearizable != "" {
				if got := Linearizable(tc.ss, 5*time.Second); got != tc.linearizable {
					t.Errorf("Linearizable = %s, want %s", got, tc.linearizable)
				}
			}
		})
	}
	if got := TokenInversions([]uint64{0, 5, 7, 7, 6, 9, 0}); got != 2 {
		t.Errorf("TokenInversions = %d, want 2", got)
	}
}
