package script

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
)

// MaxMaxTTL is the largest max ttl a deployment may have: a node that lost
// its data is out of every quorum for one max ttl, so a larger value would
// keep it out for more than a day.
const MaxMaxTTL = 24 * time.Hour

// CheckMaxTTL validates a max ttl together with the drift factor, so that
// every deployment has a positive validity and a bounded quarantine.
func CheckMaxTTL(d time.Duration, factor float64) error {
	switch {
	case d <= 0:
		return fmt.Errorf("max ttl %v must be positive", d)
	case d > MaxMaxTTL:
		return fmt.Errorf("max ttl %v exceeds %v: a node that lost its data would stay out of every quorum that long (use Do to renew a shorter lease)", d, MaxMaxTTL)
	case d%time.Millisecond != 0:
		return fmt.Errorf("max ttl %v is not a whole number of milliseconds", d)
	case d <= drift.Drift(d, factor):
		return fmt.Errorf("max ttl %v leaves no validity with drift factor %v", d, factor)
	}
	return nil
}

// QuarantineOf is how long a node that lost its data stays out of every
// quorum in a deployment with max ttl maxTTL and drift factor factor: one
// max ttl plus its drift. Every lease any client of the deployment holds
// was granted with a ttl of at most maxTTL, and its holder trusts it for
// less than that on its own clock; the quarantine starts after the data
// was lost, hence after the lease was granted, so it outlasts every lease
// the node forgot while clock rates differ by less than the drift factor.
// The settings must have passed CheckMaxTTL and drift.CheckFactor.
func QuarantineOf(maxTTL time.Duration, factor float64) time.Duration {
	return maxTTL + drift.Drift(maxTTL, factor)
}

// CheckedQuarantine is QuarantineOf for settings not checked yet: it
// returns an error for settings a Client would refuse.
func CheckedQuarantine(maxTTL time.Duration, factor float64) (time.Duration, error) {
	if err := drift.CheckFactor(factor); err != nil {
		return 0, err
	}
	if err := CheckMaxTTL(maxTTL, factor); err != nil {
		return 0, err
	}
	return QuarantineOf(maxTTL, factor), nil
}
