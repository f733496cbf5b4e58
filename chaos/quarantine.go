package chaos

import (
	"time"

	"github.com/quorumlock/quorumlock/drift"
)

// quarantineFor is how long a restarted node stays out of the quorum after
// it answers again, for leases of ttl: as long as a lease granted before
// the restart can still be valid. The faults that schedule restarts
// around it ask here, so a change of the rule is one edit.
func quarantineFor(ttl time.Duration) time.Duration {
	return ttl + drift.Drift(ttl, drift.DefaultFactor)
}
