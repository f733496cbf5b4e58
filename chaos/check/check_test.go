package check

import (
	"math"
	"testing"
	"time"
)

func TestChaosCheckers(t *testing.T) {
	sec := func(w int, got, end, deadline int64) Section {
		return Section{Worker: w, Call: got - 1, Got: got, End: end, Deadline: deadline, Release: end + 1, Outcome: OutcomeOK}
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

// TestChaosLateWrites: a late write that lands between sections is read
// by the next one; one that lands inside another holder's read-write
// window is not, because that holder's write replaces it.
func TestChaosLateWrites(t *testing.T) {
	sec := func(w int, got, end, deadline, read int64) Section {
		return Section{Worker: w, Got: got, ReadAt: got + 1, End: end, Deadline: deadline, Read: read, Outcome: OutcomeOK}
	}
	ss := []Section{
		sec(0, 0, 300, 200, 0),   // late: read 0, wrote 1 at 300
		sec(1, 210, 220, 410, 0), // took over at expiry: 0 -> 1
		sec(2, 230, 240, 430, 1), // 1 -> 2
		sec(3, 310, 320, 510, 1), // read the late write's 1: it survived, 1 erased
		sec(0, 400, 700, 600, 2), // late: read 2, wrote 3 at 700
		sec(1, 610, 620, 810, 2), // 2 -> 3
		sec(2, 690, 710, 890, 3), // read 3 before the late write, wrote 4 after it
		sec(3, 720, 730, 920, 4), // nobody read the late write's value
	}
	acc, over := LateWrites(ss)
	if acc != 2 || over != 1 {
		t.Errorf("LateWrites = %d accepted, %d overwritten; want 2 and 1", acc, over)
	}
	// On-time sections hold the counter between read and write for
	// 9 + 9 + 9 + 9 + 19 + 9 = 64 of the 730 from the first grant to the last
	// write; late sections do not count.
	if got, want := ReadWriteShare(ss), 64.0/730; math.Abs(got-want) > 1e-9 {
		t.Errorf("ReadWriteShare = %v, want %v", got, want)
	}
	if got := ReadWriteShare(nil); got != 0 {
		t.Errorf("ReadWriteShare(nil) = %v, want 0", got)
	}
	ss[4].Outcome = OutcomeRejected
	if acc, over := LateWrites(ss); acc != 1 || over != 0 {
		t.Errorf("with the second late write rejected: %d accepted, %d overwritten; want 1 and 0", acc, over)
	}
}

// TestValidOverlaps: a lease's window runs from the grant to the holder's
// release or its deadline, whichever is first; the section's end does not
// close it.
func TestValidOverlaps(t *testing.T) {
	sec := func(w int, got, end, held, deadline int64) Section {
		return Section{Worker: w, Got: got, End: end, Held: held, Deadline: deadline, Outcome: OutcomeOK}
	}
	for _, tc := range []struct {
		name            string
		ss              []Section
		valid, overlaps int
	}{
		{"one after the other", []Section{sec(0, 10, 20, 25, 100), sec(1, 30, 40, 45, 120)}, 0, 0},
		// Worker 1 was granted after worker 0's write but before its
		// release, while worker 0's lease was still valid.
		{"granted before the release", []Section{sec(0, 10, 20, 50, 100), sec(1, 30, 40, 45, 120)}, 1, 0},
		// The same, but worker 0's lease had ended by then.
		{"granted after the deadline", []Section{sec(0, 10, 20, 50, 25), sec(1, 30, 40, 45, 120)}, 0, 0},
		{"no release recorded", []Section{sec(0, 10, 35, 0, 100), sec(1, 30, 40, 45, 120)}, 1, 1},
		{"same worker", []Section{sec(0, 10, 20, 50, 100), sec(0, 30, 40, 45, 120)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidOverlaps(tc.ss); got != tc.valid {
				t.Errorf("ValidOverlaps = %d, want %d", got, tc.valid)
			}
			if got := Overlaps(tc.ss); got != tc.overlaps {
				t.Errorf("Overlaps = %d, want %d", got, tc.overlaps)
			}
		})
	}
}

// TestGrantInversions: in grant order, each token must be above every
// earlier one; unfenced grants and leases that were over when Lock
// returned do not count.
func TestGrantInversions(t *testing.T) {
	sec := func(got int64, tok uint64) Section { return Section{Got: got, Deadline: got + 100, Token: tok} }
	for _, tc := range []struct {
		name string
		ss   []Section
		want int
	}{
		{"increasing", []Section{sec(30, 7), sec(10, 3), sec(20, 5)}, 0},
		{"smaller", []Section{sec(10, 5), sec(20, 4)}, 1},
		{"equal", []Section{sec(10, 5), sec(20, 5)}, 1},
		{"below an older one", []Section{sec(10, 5), sec(20, 9), sec(30, 6)}, 1},
		{"unfenced", []Section{sec(10, 5), sec(20, 0), sec(30, 6)}, 0},
		{"over at once", []Section{sec(10, 5), {Got: 20, Deadline: 15, Token: 4}, sec(30, 6)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := GrantInversions(tc.ss); got != tc.want {
				t.Errorf("GrantInversions = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLockWait: the median and the longest wait from the lock call to the
// grant, whatever order the sections come in.
func TestLockWait(t *testing.T) {
	sec := func(call, got int64) Section { return Section{Call: call, Got: got} }
	med, longest := LockWait([]Section{sec(0, 50), sec(10, 15), sec(20, 120), sec(30, 40), sec(5, 35)})
	if med != 30 || longest != 100 {
		t.Errorf("LockWait = %d, %d; want 30 and 100", med, longest)
	}
	if med, longest := LockWait(nil); med != 0 || longest != 0 {
		t.Errorf("LockWait(nil) = %d, %d; want 0 and 0", med, longest)
	}
}
