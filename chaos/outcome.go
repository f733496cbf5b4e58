package chaos

import "fmt"

// Outcome is how a worker's attempt at a critical section ended. Only
// OutcomeOK, OutcomeRejected and OutcomeError are ever recorded; the
// history stores them by their String form.
type Outcome uint8

const (
	// outcomeNotLocked: the lock was not obtained, so there was no
	// section (the zero value, so a forgotten assignment reads as this).
	outcomeNotLocked Outcome = iota
	// OutcomeOK: the section's write was accepted.
	OutcomeOK
	// OutcomeRejected: fencing refused the write as stale; the worker
	// redoes the increment under a fresh lease.
	OutcomeRejected
	// OutcomeError: the section failed for another reason.
	OutcomeError
	// outcomeStopped: the coordinator went away while the worker waited
	// at its "locked" gate; the worker ends without recording it.
	outcomeStopped
)

var outcomeNames = [...]string{
	outcomeNotLocked: "not-locked",
	OutcomeOK:        "ok",
	OutcomeRejected:  "rejected",
	OutcomeError:     "error",
	outcomeStopped:   "stopped",
}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// recorded reports whether o is a section's outcome, as the history
// stores it.
func (o Outcome) recorded() bool {
	return o == OutcomeOK || o == OutcomeRejected || o == OutcomeError
}

// parseOutcome reads a recorded outcome back from the history.
func parseOutcome(s string) (Outcome, error) {
	for o, name := range outcomeNames {
		if name == s && Outcome(o).recorded() {
			return Outcome(o), nil
		}
	}
	return 0, fmt.Errorf("chaos: unknown section outcome %q in the history", s)
}
