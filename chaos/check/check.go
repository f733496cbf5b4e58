package check

import (
	"cmp"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// ValidOverlaps counts pairs of sections of different workers whose held
// windows intersect: two leases of the key that were valid at once. It
// is Overlaps with the window stretched to the release; a worker that
// did not record its release counts up to the end of its section.
func ValidOverlaps(ss []Section) int {
	return overlapPairs(ss, Section.held)
}

// GrantInversions counts grants whose fencing token is not larger than
// the token of a grant before it, in the order the leases were granted.
// Only leases that were valid when Lock returned count (a lease whose
// holder got it back after its deadline never was the holder), and
// grants without a token are skipped. Two valid leases granted in this
// order never coexist (ValidOverlaps), so the later one must have the
// larger token: that is what fencing promises.
func GrantInversions(ss []Section) int {
	type grant struct {
		got int64
		tok uint64
	}
	var gs []grant
	for _, s := range ss {
		if s.Token != 0 && s.Got < s.Deadline {
			gs = append(gs, grant{s.Got, s.Token})
		}
	}
	slices.SortStableFunc(gs, func(a, b grant) int { return cmp.Compare(a.got, b.got) })
	var hi uint64
	n := 0
	for _, g := range gs {
		if g.tok <= hi {
			n++
		}
		hi = max(hi, g.tok)
	}
	return n
}

// Overlaps counts pairs of sections of different workers whose valid
// windows intersect: two leases the lock service let coexist. A holder
// that keeps working after its deadline (a frozen process) is not counted
// here; StaleOverlaps counts those too.
func Overlaps(ss []Section) int {
	return overlapPairs(ss, Section.valid)
}

// StaleOverlaps counts pairs of sections of different workers whose whole
// spans, lock to write, intersect, whether or not the leases were still
// valid: what the protected resource saw.
func StaleOverlaps(ss []Section) int {
	return overlapPairs(ss, func(s Section) (int64, int64) { return s.Got, s.End })
}

func overlapPairs(ss []Section, span func(Section) (int64, int64)) int {
	type iv struct {
		w        int
		from, to int64
	}
	ivs := make([]iv, 0, len(ss))
	for _, s := range ss {
		f, t := span(s)
		if t > f {
			ivs = append(ivs, iv{s.Worker, f, t})
		}
	}
	slices.SortFunc(ivs, func(a, b iv) int { return cmp.Compare(a.from, b.from) })
	n := 0
	for i := range ivs {
		for j := i + 1; j < len(ivs) && ivs[j].from < ivs[i].to; j++ {
			if ivs[j].w != ivs[i].w {
				n++
			}
		}
	}
	return n
}

// LateWrites looks at the accepted writes of sections that ended after
// their lease deadline. Such a write sets the counter to what its section
// read plus one. If it lands between two other sections it erases every
// increment committed since its read; if it lands while the next holder
// is between its own read and write, that holder overwrites it and only
// the late section's increment is lost. It returns how many late writes
// were accepted and how many of those no section read afterwards (the
// second case), so that lost updates can be split into the two. A read
// counts as afterwards when it was sent after the late write returned.
func LateWrites(ss []Section) (accepted, overwritten int) {
	for i, s := range ss {
		if s.Outcome != OutcomeOK || s.End <= s.Deadline {
			continue
		}
		accepted++
		read := false
		for j, o := range ss {
			if j != i && o.Read == s.Read+1 && o.ReadAt > s.End {
				read = true
				break
			}
		}
		if !read {
			overwritten++
		}
	}
	return accepted, overwritten
}

// ReadWriteShare is the share of the run, from the first grant to the
// last write, during which a section that kept to its lease was between
// its read and its write. A late write landing at a random moment is
// overwritten (and costs only its own increment) with about this
// probability; otherwise it lands between two sections and erases what
// was committed since its read.
func ReadWriteShare(ss []Section) float64 {
	var from, to, busy int64
	seen := false
	for _, s := range ss {
		if s.Outcome != OutcomeOK || s.ReadAt == 0 {
			continue
		}
		if !seen || s.Got < from {
			from, seen = s.Got, true
		}
		to = max(to, s.End)
		if s.End <= s.Deadline && s.End > s.ReadAt {
			busy += s.End - s.ReadAt
		}
	}
	if to <= from {
		return 0
	}
	return float64(busy) / float64(to-from)
}

// TokenInversions counts writes the resource accepted with a token not
// larger than one it had accepted before (tokens in commit order; 0, a
// write without a token, is skipped).
func TokenInversions(tokens []uint64) int {
	var hi uint64
	n := 0
	for _, t := range tokens {
		if t == 0 {
			continue
		}
		if t <= hi {
			n++
		}
		hi = max(hi, t)
	}
	return n
}

// LockWait is the median and the longest time from a lock call to its
// grant over the sections, in nanoseconds: how long a stalled or frozen
// holder kept the others waiting. Both are 0 for no sections.
func LockWait(ss []Section) (median, longest int64) {
	if len(ss) == 0 {
		return 0, 0
	}
	w := make([]int64, len(ss))
	for i, s := range ss {
		w[i] = s.Got - s.Call
	}
	slices.Sort(w)
	return w[len(w)/2], w[len(w)-1]
}

// lockModel is a mutex: acquire succeeds only when nobody holds it, release
// only by the holder. A lease that ended without a Release (it expired)
// is released at its deadline, when its holder had to stop trusting it.
var lockModel = porcupine.Model{
	Init: func() any { return -1 },
	Step: func(state, input, _ any) (bool, any) {
		holder := state.(int)
		in := input.(lockOp)
		if in.acquire {
			return holder == -1, in.worker
		}
		return holder == in.worker, -1
	},
	DescribeOperation: func(input, _ any) string {
		in := input.(lockOp)
		if in.acquire {
			return "acquire"
		}
		return "release"
	},
}

type lockOp struct {
	worker  int
	acquire bool
}

// Linearizable checks the lock history against a mutex with porcupine:
// each section is an acquire (from the Lock call to its return) followed
// by a release (from the end of the section, or the deadline if earlier,
// to the release's return, or the deadline if earlier). It returns "ok",
// "violation" or "unknown" (timed out).
func Linearizable(ss []Section, timeout time.Duration) string {
	ops := make([]porcupine.Operation, 0, 2*len(ss))
	for _, s := range ss {
		ops = append(ops, porcupine.Operation{ClientId: s.Worker, Input: lockOp{s.Worker, true}, Call: s.Call, Return: s.Got})
		rc := min(s.End, s.Deadline)
		rr := max(min(s.Release, s.Deadline), rc+1)
		ops = append(ops, porcupine.Operation{ClientId: s.Worker, Input: lockOp{s.Worker, false}, Call: rc, Return: rr})
	}
	switch porcupine.CheckOperationsTimeout(lockModel, ops, timeout) {
	case porcupine.Ok:
		return "ok"
	case porcupine.Illegal:
		return "violation"
	default:
		return "unknown"
	}
}
