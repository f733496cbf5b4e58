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
// quarantine that an attempt has already started (docs/fencing.md,
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

// noticeQuarantine reports the attempt refused with e (ReasonQuarantine)
// to the log and to WithQuarantineNotice's function, unless this episode
// was reported already. An episode lasts until the quarantine that was
// reported should have ended (one full quarantine when its end is
// unknown); a refusal after that is a new one, except one that finds
// the quarantine over (e.Wait = 0) within one more quarantine: that is
// the reported episode's end, whose admission an attempt has not made
// yet (it missed its node timeout on a busy host, say). A new episode
// has time left, unless the attempt could not read it; such a refusal
// this close to the last episode goes unreported (only the notice: the
// refusal itself is returned as ever).
func (c *Client) noticeQuarantine(e *NotObtainedError) {
	now := c.cfg.clock.Now()
	span := e.Wait
	if span <= 0 {
		span = c.set.quarantine()
	}
	c.notices.mu.Lock()
	if now.Before(c.notices.until) ||
		e.Wait <= 0 && !c.notices.until.IsZero() && now.Before(c.notices.until.Add(c.set.quarantine())) {
		c.notices.mu.Unlock()
		return
	}
	c.notices.until = now.Add(span)
	c.notices.mu.Unlock()
	n := QuarantineNotice{Key: e.Key, Quarantined: quarantined(e), HeldOff: heldOff(e), Nodes: e.Nodes, Left: e.Wait}
	if n.Reconfiguring() {
		c.cfg.logger.Warn("redlock: locks are refused until the hold-off of a reconfiguration to this client's settings ends; the nodes admit themselves then",
			"key", keyText(n.Key), "held_off_at_least", n.HeldOff, "nodes", n.Nodes, "left", n.Left)
	} else {
		c.cfg.logger.Warn("redlock: locks are refused until the nodes' restart quarantine ends (they are new or lost their data); they admit themselves then",
			"key", keyText(n.Key), "quarantined_at_least", n.Quarantined, "held_off_at_least", n.HeldOff, "nodes", n.Nodes, "left", n.Left)
	}
	if c.cfg.onQuarantine != nil {
		c.cfg.onQuarantine(n)
	}
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
