package redlock

import (
	"errors"
	"sync"
	"time"
)

// QuarantineNotice says that locks are refused because too few nodes may
// vote yet: they are new (a deployment nobody has used) or lost their data,
// and each serves its restart quarantine before it votes. Waiting is the
// remedy: the nodes are admitted when it ends, without any call. Bootstrap
// admits only a deployment that shows no sign of use, so it cannot end a
// quarantine that an attempt has already started (docs/protocol.md,
// "Bootstrap").
//
// A reconfiguration to the client's settings (Client.Reconfigure) holds
// the new nodes off the same way; HeldOff counts them, and when every
// node found is held off, Left is the time until the first hold-off ends.
type QuarantineNotice struct {
	Key         string        // the key of the refused attempt
	Quarantined int           // nodes the attempt found in quarantine or hold-off: at least this many
	HeldOff     int           // of Quarantined: nodes in a reconfiguration's hold-off
	Nodes       int           // nodes in the deployment
	Left        time.Duration // until the first of those quarantines ends; 0 when unknown
}

// Reconfiguring reports whether every node found in quarantine is in
// the hold-off of a reconfiguration to the client's settings: a change is
// under way, not a loss of data.
func (n QuarantineNotice) Reconfiguring() bool { return n.HeldOff > 0 && n.HeldOff == n.Quarantined }

// notices keeps quarantine notices to one per episode, not one per
// attempt, node or Lock call: a waiting Lock tries again every few
// milliseconds, and a new deployment's every node is in quarantine.
type notices struct {
	mu    sync.Mutex
	until time.Time // the current episode's expected end
}

// heldOff counts the nodes e found in a reconfiguration's hold-off.
func heldOff(e *NotObtainedError) int { return countCauses(e, errHeldOff) }

// quarantined counts the nodes e found in quarantine (or hold-off).
func quarantined(e *NotObtainedError) int { return countCauses(e, ErrNodeQuarantined) }

// countCauses counts e's per-node errors that match target.
func countCauses(e *NotObtainedError, target error) int {
	k := 0
	for _, ne := range e.NodeErrors() {
		if errors.Is(ne.Err, target) {
			k++
		}
	}
	return k
}
