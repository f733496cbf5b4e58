package chaos

import (
	"fmt"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// attemptOutcome is how a worker's attempt at a critical section ended.
// Three of them leave a section in the history, as check's outcomes
// (recorded); the other two never reach it.
type attemptOutcome uint8

const (
	// outcomeNotLocked: the lock was not obtained, so there was no
	// section (the zero value, so a forgotten assignment reads as this).
	outcomeNotLocked attemptOutcome = iota
	// outcomeOK: the section's write was accepted.
	outcomeOK
	// outcomeRejected: fencing refused the write as stale; the worker
	// redoes the increment under a fresh lease.
	outcomeRejected
	// outcomeError: the section failed for another reason.
	outcomeError
	// outcomeStopped: the coordinator went away while the worker waited
	// at its "locked" gate; the worker ends without recording it.
	outcomeStopped
)

// recorded returns the outcome the history stores for o; false for the
// attempts that leave no section.
func (o attemptOutcome) recorded() (check.Outcome, bool) {
	switch o {
	case outcomeOK:
		return check.OutcomeOK, true
	case outcomeRejected:
		return check.OutcomeRejected, true
	case outcomeError:
		return check.OutcomeError, true
	}
	return 0, false
}

// String is the text the history stores for a recorded outcome
// (check.Outcome's), and a name for the others.
func (o attemptOutcome) String() string {
	if r, ok := o.recorded(); ok {
		return r.String()
	}
	switch o {
	case outcomeNotLocked:
		return "not-locked"
	case outcomeStopped:
		return "stopped"
	}
	return fmt.Sprintf("attemptOutcome(%d)", o)
}
