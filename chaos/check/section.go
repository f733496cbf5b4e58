package check

import "fmt"

// Section is one critical section as a worker recorded it. Times are
// nanoseconds on the machine's monotonic clock, which every worker shares
// (they run on one host) and which no wall-clock step moves; only the
// Redis nodes' wall clocks are ever moved on purpose.
type Section struct {
	Worker   int
	Token    uint64
	Call     int64 // Lock called
	Got      int64 // Lock returned the lease; the section starts
	Deadline int64 // the lease's validity ends
	End      int64 // the write returned; the section ends
	Release  int64 // Release returned
	ReadAt   int64 // the read of the counter was sent (0: no read)
	Read     int64 // the counter value the section read
	Outcome  Outcome
	Row      int   // the counter row it incremented, or a transfer's first account
	Held     int64 // the holder let go of the lease: Release called, or Do's fn returned (0: not recorded)
	// Row2 and Token2 are a transfer's second account and the fencing
	// token of that account's key (Token is the first account's); 0 for
	// a section on one row. Both keys are held for the whole section.
	Row2   int
	Token2 uint64
}

// valid is the part of the section during which its lease was valid: the
// window in which no other holder may exist.
func (s Section) valid() (int64, int64) { return s.Got, min(s.End, s.Deadline) }

// held is the whole time the section's lease was valid: from the grant
// until the holder let go of it (called Release, or returned from Do's
// fn) or its deadline passed, whichever came first. The holder can act
// anywhere in it, also after its write, so no other lease of the key may
// be valid in it. The start is Lock's return: the library does not show
// when its acquire round began, and a holder cannot act before it has
// the lease.
func (s Section) held() (int64, int64) {
	return s.Got, min(max(s.Held, s.End), s.Deadline)
}

// Outcome is how a recorded critical section ended. The history stores it
// by its String form; the zero value is no outcome and never recorded.
type Outcome uint8

const (
	// OutcomeOK: the section's write was accepted.
	OutcomeOK Outcome = iota + 1
	// OutcomeRejected: fencing refused the write as stale.
	OutcomeRejected
	// OutcomeError: the section failed for another reason.
	OutcomeError
)

var outcomeNames = [...]string{
	OutcomeOK:       "ok",
	OutcomeRejected: "rejected",
	OutcomeError:    "error",
}

func (o Outcome) String() string {
	if o != 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// ParseOutcome reads an outcome back from its String form, as the history
// stores it.
func ParseOutcome(s string) (Outcome, error) {
	for o, name := range outcomeNames {
		if o != 0 && name == s {
			return Outcome(o), nil
		}
	}
	return 0, fmt.Errorf("check: unknown section outcome %q", s)
}
