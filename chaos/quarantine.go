package chaos

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// quarantineFor is how long a restarted node stays out of the quorum after
// it answers again, for a deployment whose max ttl is ttl: redlock's rule,
// asked of redlock. The faults that schedule restarts around it ask here.
func quarantineFor(ttl time.Duration) time.Duration {
	q, err := redlock.Quarantine(ttl, redlock.DefaultDriftFactor)
	if err != nil {
		panic(fmt.Sprintf("chaos: quarantine for max ttl %v: %v", ttl, err)) // scenarios are checked before they run
	}
	return q
}
