package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// One admission check of a node (admission.step runs it in its span): the
// node's pending mark and quarantine, its peers' confirmation, and the
// admission itself, or, for a node a reconfiguration to this client's
// settings holds off, the end of its hold-off.

// check runs one admission check of node i (step: with its span). It
// returns admitted, or how much of the quarantine is left, or an error when
// the node or its peers did not answer well enough to decide, or the
// settings conflict (ErrConfigMismatch).
func (a *admission) check(ctx context.Context, i int) (bool, time.Duration, error) {
	c := a.c
	nd := c.nodes[i]
	set := c.dep.settings
	if e := a.conflict.Load(); e != nil {
		return false, 0, e
	}
	p, err := nd.sn.Pending(ctx, script.PendingArgs{ID: newValue(), Settings: c.dep.marker,
		Quarantine: set.quarantine(), TTL: set.pendingTTL(), Replace: a.seenPeer(i)})
	if err != nil {
		return false, 0, c.nodeErr(i, err)
	}
	if marker := p.Marker; marker != "" {
		if c.movingHere(marker) {
			return a.finish(ctx, i)
		}
		if marker != c.dep.marker {
			e := c.mismatch(i, marker, false)
			a.conflicted(e)
			return false, 0, e
		}
		a.seen[i].Store(true)
		return true, 0, nil
	}
	if p.Settings != c.dep.marker {
		return false, 0, c.mismatch(i, p.Settings, true)
	}
	left := p.Quarantine.Left()
	a.mu.Lock()
	if a.logged[i] != p.ID {
		a.logged[i] = p.ID
		// Info, once per node and quarantine: a refused lock is the
		// event that needs attention, logged at Warn once per episode
		// (noticeQuarantine).
		c.cfg.logger.Info("redlock: node is in quarantine (it lost its data, or the deployment is new)", "node", i, "addr", nd.name, "left", left)
	}
	a.mu.Unlock()
	if left > 0 {
		return false, left, nil
	}
	if err := a.confirm(ctx, i); err != nil {
		return false, 0, err
	}
	st, err := nd.sn.Admit(ctx, script.AdmitArgs{ID: p.ID, Settings: c.dep.marker})
	switch {
	case err != nil:
		return false, 0, c.nodeErr(i, err)
	case st == script.AdmittedAs:
		return false, 0, c.mismatch(i, "(admitted meanwhile under other settings)", false)
	case st != script.Admitted:
		return false, 0, nil // lost its data again, or the mark expired, while we waited: start over
	}
	a.seen[i].Store(true)
	c.cfg.logger.Info("redlock: node admitted", "node", i, "addr", nd.name)
	return true, 0, nil
}

// confirm checks node i's peers before i is admitted: some peer must
// already be admitted with this client's settings, or, for the first
// admission of a deployment, every peer must answer and none may carry a
// marker or a pending mark with other settings.
func (a *admission) confirm(ctx context.Context, i int) error {
	c := a.c
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, j int) (script.State, error) {
		if j == i {
			return script.State{}, errSelf
		}
		return c.nodes[j].sn.State(ctx)
	})
	admittedPeer := func(rep quorum.Reply[script.State]) bool { return rep.Err == nil && rep.Val.Marker == c.dep.marker }
	replies := r.Await(ctx, 1, admittedPeer)
	r.Cancel()
	c.spawn(func() { r.Wait() })
	var answered int
	var conflict error
	var errs []error
	var peers []script.Peer
	for _, rep := range replies {
		if errors.Is(rep.Err, errSelf) {
			continue
		}
		if rep.Err != nil {
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
			continue
		}
		p := script.ReadPeer(rep.Val, c.dep.marker)
		peers = append(peers, p)
		switch p {
		case script.PeerMoving:
			// A peer held off by a reconfiguration to these settings: not
			// yet evidence that they took hold, and not a first admission
			// either (docs/reconfiguration.md, "Changing the settings of a live
			// deployment"). Wait until a peer is admitted with them.
			errs = append(errs, c.nodeErr(rep.Node, errors.New("being reconfigured to this client's settings: its hold-off is not over")))
		case script.PeerOther:
			conflict = c.mismatch(rep.Node, rep.Val.Marker, false)
		case script.PeerPendingOther:
			conflict = c.mismatch(rep.Node, rep.Val.Pending, true)
		case script.PeerBare:
			answered++
		}
	}
	switch script.Confirm(peers, n-1) {
	case script.ConfirmAdmitted, script.ConfirmFirst:
		return nil // a peer is admitted, or the first admission of the deployment: every peer agrees
	case script.ConfirmConflict:
		return conflict
	}
	return errors.Join(append([]error{fmt.Errorf("redlock: node %d served its quarantine, but no peer is admitted yet and only %d of its %d peers answered: admitting it waits for all of them (or for Bootstrap)", i, answered, n-1)}, errs...)...)
}

var errSelf = errors.New("self")

// errNoHoldOff is a node a reconfiguration to this client's settings
// marked in its first step only: the command stopped before it stamped
// the hold-off, and must be run again.
var errNoHoldOff = errors.New("the node is being reconfigured to this client's settings, but its hold-off was not stamped yet (if quorumlock reconfigure stopped, run it again)")

// finish admits node i, which a reconfiguration to this client's settings
// holds off, once its hold-off is over (see step).
func (a *admission) finish(ctx context.Context, i int) (bool, time.Duration, error) {
	c := a.c
	rep, err := c.nodes[i].sn.Reconfigure(ctx, script.ReconfigureArgs{Step: script.StepFinish, To: c.dep.marker})
	switch {
	case err != nil:
		return false, 0, c.nodeErr(i, err)
	case rep.Status == script.ReconfigureDone:
		a.saw(i)
		c.cfg.logger.Info("redlock: node admitted after its reconfiguration hold-off", "node", i, "addr", c.nodes[i].name)
		return true, 0, nil
	case rep.Status == script.ReconfigureWaiting && rep.Left > 0:
		return false, rep.Left, nil
	case rep.Status == script.ReconfigureWaiting:
		return false, 0, c.nodeErr(i, errNoHoldOff)
	case rep.Marker == "":
		return false, 0, nil // lost its data meanwhile: an ordinary quarantine from the next step
	default:
		return false, 0, c.mismatch(i, rep.Marker, false)
	}
}
