package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// What a reconfiguration reads before it writes anything (run's first
// phases: read, check, nothingToDo), what it makes of the looks (may a
// node be moved, is the change done, what were the old settings), and the
// step it writes on one node.

// look is one node's identity and admission state.
type look struct {
	id    string
	st    script.State
	trace string // the settings a reconfiguration moved the node from
	err   error
}

// read looks at every node first: who is who (a node in both lists is one
// server under two entries), and whether each is in a state this change
// may move. With readFrom it reads the old settings from the old nodes'
// looks. It names the change by its new nodes' identities (r.rec).
func (r *reconfig) read(ctx context.Context) (oldLook, newLook []look, err error) {
	c := r.c
	news := c.nodes
	oldLook = fanOut(ctx, r.olds, r.look)
	newLook = fanOut(ctx, news, r.look)
	if r.readFrom {
		old, err := r.oldFromLooks(oldLook)
		if err != nil {
			return nil, nil, err
		}
		r.from, r.holdOff = old.String(), max(old.quarantine(), c.dep.quarantine())
	}
	var newIDs []string
	for _, l := range newLook {
		if l.err == nil {
			newIDs = append(newIDs, l.id)
		}
	}
	r.rec = script.ChangeRecord(r.from, r.to, newIDs)
	return oldLook, newLook, nil
}

// check refuses the change, before anything is written, unless every new
// node and enough old nodes answer, to refuse the old settings on all but a
// minority of the old list, and every node that answers can be moved.
func (r *reconfig) check(oldLook, newLook []look) error {
	news := r.c.nodes
	need := script.ReconfigureNeed(len(r.olds))
	var errs, down, newDown []error
	var answered int
	ids := map[string]string{}
	checkOne := func(side string, i int, nd *node, l look, want string) {
		switch {
		case l.err != nil:
			// A refusal stays typed: running it again does not help.
			e := &NodeError{Node: i, Addr: nd.name, Err: fmt.Errorf("%s node: %w", side, typed(l.err))}
			down = append(down, e)
			if side == "new" {
				newDown = append(newDown, e)
			}
		case !r.movable(l):
			errs = append(errs, r.unmovable(side, i, nd, l, want))
		default:
			if prev, ok := ids[side+l.id]; ok {
				errs = append(errs, fmt.Errorf("redlock: Reconfigure: %s nodes %s and %s are one server", side, prev, nd.name))
			}
			ids[side+l.id] = nd.name
			if side == "old" {
				answered++
			}
		}
	}
	for i, l := range oldLook {
		checkOne("old", i, r.olds[i], l, r.from)
	}
	for i, l := range newLook {
		checkOne("new", i, news[i], l, r.to)
	}
	if errs != nil {
		return errors.Join(append([]error{errors.New("redlock: Reconfigure refused: a node carries settings or marks that are not this change's to move (another deployment, another change under way, or the wrong old settings), or is listed twice; nothing was written")}, append(errs, down...)...)...)
	}
	if newDown != nil {
		// The change is named by its new nodes' identities, and step 1
		// marks every new node before any client of the new settings may
		// start: each must answer.
		return errors.Join(append([]error{fmt.Errorf("%w; %d of %d new nodes did not answer, and every new node must; nothing was written", ErrReconfigureIncomplete, len(newDown), len(news))}, newDown...)...)
	}
	if answered < need {
		return errors.Join(append([]error{fmt.Errorf("%w; only %d of %d old nodes answered and %d must, to refuse the old settings on all but a minority of them; nothing was written", ErrReconfigureIncomplete, answered, len(r.olds), need)}, down...)...)
	}
	return nil
}

// nothingToDo reports whether the change has nothing left to write: the
// settings and the node list are unchanged, or an earlier run finished
// it. A change of the node list alone is refused.
func (r *reconfig) nothingToDo(oldLook, newLook []look, stays map[string]bool) (bool, error) {
	c := r.c
	if r.from == r.to {
		if script.ReconfigureUnchanged(r.from, r.to, lookIDs(oldLook), lookIDs(newLook)) {
			return true, nil // nothing to change
		}
		// The nodes cannot tell a client of the old list from one of the
		// new: both carry the same settings. After the change a client of
		// the old list would still lock on the nodes that stay, and on a
		// node that left once it came back (or was wiped and re-admitted
		// by such a client), so a majority of the old list and one of the
		// new could be disjoint.
		return false, fmt.Errorf("redlock: Reconfigure refused: the node list changes but the settings (%s) do not, so the nodes cannot refuse clients of the old list; change the max ttl or the drift factor together with the nodes (one millisecond more max ttl will do); nothing was written", r.to)
	}
	if r.done(oldLook, newLook, stays) {
		c.cfg.logger.Info("redlock: reconfiguration already done: every node of both lists carries its outcome; nothing was written",
			"from", r.from, "to", r.to, "step", "done")
		return true, nil
	}
	return false, nil
}

// movable reports whether a node may take part: it carries the old
// settings, none (new, or lost its data), the marks of a reconfiguration
// (this one's, or an earlier one that stopped), or the new settings
// written by this reconfiguration (an earlier run finished it). A node
// that carried the new settings before belongs to another deployment: its
// clients could lock on it at once, with no hold-off.
func (r *reconfig) movable(l look) bool {
	return script.ReconfigureMovable(l.st.Marker, l.trace, r.from, r.to, r.rec)
}

// unmovable says why a node is not this change's to move, and what the
// operator can do: another change under way is named by its settings, so
// that the operator can run that one again.
func (r *reconfig) unmovable(side string, i int, nd *node, l look, want string) error {
	if ch, ok := script.ParseChange(l.trace); ok && l.st.Marker != "" && l.st.Marker != want {
		state := "is being moved by"
		if l.st.Marker == ch.To {
			state = "was moved by"
		}
		if ch.From == r.from && ch.To == r.to {
			return fmt.Errorf("%s node %d (%s) %s this change for another new node list (%d nodes): run it with that list, or finish it first", side, i, nd.name, state, ch.Nodes)
		}
		return fmt.Errorf("%s node %d (%s) %s another change, from %q to %q over %d nodes: run that change again (its old settings and node lists) to finish it, then change from there", side, i, nd.name, state, ch.From, ch.To, ch.Nodes)
	}
	return &ConfigError{Node: i, Addr: nd.name, Deployment: l.st.Marker, Client: want}
}

// done reports whether an earlier run finished this change
// (script.ReconfigureFinished): every node of both lists answered, every
// new node carries the new settings and every old node that leaves is
// retired.
func (r *reconfig) done(oldLook, newLook []look, stays map[string]bool) bool {
	var news, leaving []string
	for _, l := range newLook {
		if l.err != nil {
			return false
		}
		news = append(news, l.st.Marker)
	}
	for _, l := range oldLook {
		if l.err != nil {
			return false
		}
		if !stays[l.id] {
			leaving = append(leaving, l.st.Marker)
		}
	}
	return script.ReconfigureFinished(r.from, r.to, news, leaving)
}

// oldFromLooks reads the old settings from the old nodes that answered:
// the settings a node was admitted with, or, on a node a change marked,
// that change's old settings, unless the change made it what it is now
// and this client's settings are not that change's new ones (then this is
// a change from there). Every node that gives settings must give the same,
// for as many nodes as the old list has.
func (r *reconfig) oldFromLooks(looks []look) (settings, error) {
	found := map[string][]string{}
	var order []string
	var answered int
	for _, l := range looks {
		if l.err == nil {
			answered++
		}
	}
	if need := script.ReconfigureNeed(len(looks)); answered < need {
		errs := []error{fmt.Errorf("%w; only %d of %d old nodes answered, %d must, to read the old settings from them and refuse them on all but a minority; nothing was written", ErrReconfigureIncomplete, answered, len(looks), need)}
		for i, l := range looks {
			if l.err != nil {
				// A refusal stays typed: running it again does not help.
				errs = append(errs, &NodeError{Node: i, Addr: r.olds[i].name, Err: fmt.Errorf("old node: %w", typed(l.err))})
			}
		}
		return settings{}, errors.Join(errs...)
	}
	for i, l := range looks {
		if l.err != nil {
			continue
		}
		s := script.ReconfigureOldSettingsOf(l.st.Marker, l.trace, r.to)
		if s == "" {
			continue // new, or lost its data: it says nothing
		}
		if _, ok := found[s]; !ok {
			order = append(order, s)
		}
		found[s] = append(found[s], r.olds[i].name)
	}
	switch len(order) {
	case 0:
		return settings{}, errors.New("redlock: Reconfigure: no old node that answered records its settings (new, or lost their data): give the old settings (WithMaxTTL, WithDriftFactor); nothing was written")
	case 1:
	default:
		var parts []string
		for _, s := range order {
			parts = append(parts, fmt.Sprintf("%q on %s", s, strings.Join(found[s], ", ")))
		}
		return settings{}, fmt.Errorf("redlock: Reconfigure: the old nodes record different settings (%s): give the old settings (WithMaxTTL, WithDriftFactor), or check the node list; nothing was written", strings.Join(parts, "; "))
	}
	old, ok := parseSettings(order[0])
	switch {
	case !ok:
		return settings{}, fmt.Errorf("redlock: Reconfigure: the old nodes record %q, which are not settings of this version: give the old settings (WithMaxTTL, WithDriftFactor); nothing was written", order[0])
	case old.nodes != len(r.olds):
		return settings{}, fmt.Errorf("redlock: Reconfigure: the old nodes were admitted with %d nodes, and %d old nodes were given: list every old node, as the old clients do; nothing was written", old.nodes, len(r.olds))
	}
	return old, nil
}

// lookIDs are the identities of the nodes looked at, "" for one that did not
// answer.
func lookIDs(looks []look) []string {
	out := make([]string, len(looks))
	for i, l := range looks {
		if l.err == nil {
			out[i] = l.id
		}
	}
	return out
}

func (r *reconfig) look(ctx context.Context, nd *node) look {
	// Bounded like New's probe: a node that does not answer is left out
	// of the steps (and named in the error), not waited for.
	ctx, cancel := context.WithTimeout(ctx, r.c.cfg.probe)
	defer cancel()
	id, err := nd.sn.Ident(ctx, newValue())
	if err != nil {
		return look{err: err}
	}
	st, err := nd.sn.State(ctx)
	if err != nil {
		return look{err: err}
	}
	trace, err := nd.sn.Trace(ctx)
	return look{id: id, st: st, trace: trace, err: err}
}

type stepResult struct {
	rep script.ReconfigureReply
	err error
}

// failed is why a step did not take on its node, nil when it did.
func (s stepResult) failed() error {
	switch {
	case s.err != nil:
		return s.err
	case s.rep.Status == script.ReconfigureOther:
		return fmt.Errorf("carries %q, neither the old nor the new settings", s.rep.Marker)
	}
	return nil
}

func (r *reconfig) step(ctx context.Context, nd *node, s script.ReconfigureStep) stepResult {
	rep, err := nd.sn.Reconfigure(ctx, script.ReconfigureArgs{Step: s, From: r.from, To: r.to, Record: r.rec,
		HoldOff: r.holdOff, TTL: markTTL(r.holdOff), ID: newValue()})
	return stepResult{rep, err}
}

// fanOut runs f on every node at once and returns the results in node
// order, once every call has returned (each is bounded by ctx).
func fanOut[T any](ctx context.Context, nodes []*node, f func(context.Context, *node) T) []T {
	out := make([]T, len(nodes))
	for _, r := range quorum.Start(nil, ctx, len(nodes), func(ctx context.Context, i int) (T, error) {
		return f(ctx, nodes[i]), nil
	}).Wait() {
		out[r.Node] = r.Val
	}
	return out
}
