package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// What a reconfiguration reads and writes per node: the look it takes at
// each node first (identity, admission state, trace), what it makes of the
// looks (may the node be moved, is the change done, what were the old
// settings), and the step it writes.

// look is one node's identity and admission state.
type look struct {
	id    string
	st    script.State
	trace string // the settings a reconfiguration moved the node from
	err   error
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
	var wg sync.WaitGroup
	for i, nd := range nodes {
		wg.Go(func() { out[i] = f(ctx, nd) })
	}
	wg.Wait()
	return out
}
