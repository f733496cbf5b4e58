package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The operator's two actions on a deployment: Bootstrap here, and
// Reconfigure's entry point at the end of this file (its phases are in
// reconfigure.go and reconfigure_look.go).

// Bootstrap admits every node of a brand-new deployment at once, with this
// client's settings, so that the first lock does not wait one quarantine.
// It is safe to call at every start: it admits nodes only when every node
// answers and none carries a marker or a pending mark (no client has used
// the deployment, or found a node without its state, since the nodes were
// emptied), and does nothing else.
//
//   - Every node admitted with these settings: it writes nothing and
//     returns nil.
//   - A node admitted with other settings: a *ConfigError
//     (ErrConfigMismatch), and nothing is written.
//   - A node that does not answer: an error, and nothing is written.
//   - Signs of use (some node admitted, a quarantine in progress, or a
//     reconfiguration to these settings holding nodes off) with nodes not
//     admitted: those nodes start (or go on with) their ordinary
//     quarantine or hold-off, and Bootstrap returns a *NotNewError
//     (ErrNotNew) that names them and says when each ends; nil if that
//     admitted them all.
//   - Every node bare: Bootstrap claims each node (a pending mark of its
//     own, stamped by the node), then admits each node that still carries
//     its claim; a node that lost its data since has none and serves an
//     ordinary quarantine from its next use.
//
// A deployment whose every node lost its data looks exactly like a new one;
// Bootstrap then admits it at once, which is safe only if no lease from
// before the loss is still trusted (docs/protocol.md, "Bootstrap" and "The
// residual case"). Safe for concurrent use.
func (c *Client) Bootstrap(ctx context.Context) (err error) {
	defer func() { c.countConfigError(err) }()
	if c.isClosed() {
		return ErrClosed
	}
	states, err := c.states(ctx)
	if err != nil {
		return err
	}
	unmarked, used := script.BootstrapUse(states, c.dep.marker)
	switch {
	case len(unmarked) == 0:
		return nil
	case used:
		return c.inUse(ctx, unmarked)
	}
	id := newValue()
	w := c.dep.bootstrapWindow()
	for pass := 0; ; pass++ {
		err := c.claim(ctx, id, w)
		if err == nil {
			break
		}
		if errors.Is(err, errTaken) {
			// Someone used the deployment since it was read: the claims
			// written are ordinary quarantines now.
			all := make([]int, len(c.nodes))
			for i := range all {
				all[i] = i
			}
			return c.inUse(ctx, all)
		}
		var slow *slowClaim
		if !errors.As(err, &slow) {
			return err
		}
		if pass == 2 {
			return fmt.Errorf("redlock: Bootstrap refused: claiming every node took %v, more than the %v a bootstrap may take (the nodes serve an ordinary quarantine from their claims)", slow.took, w)
		}
		// Claim again: the nodes still carry only this Bootstrap's claims,
		// which the next pass stamps anew.
	}
	return c.admitClaimed(ctx, id, w)
}

// states reads every node's admission state; every node must answer, and
// none may carry other settings.
func (c *Client) states(ctx context.Context) ([]script.State, error) {
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (script.State, error) {
		return c.nodes[i].sn.State(ctx)
	})
	replies := r.Await(ctx, n, func(quorum.Reply[script.State]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() })
	out := make([]script.State, n)
	var errs []error
	for _, rep := range replies {
		switch {
		case rep.Err != nil:
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
		case rep.Val.Marker != "" && rep.Val.Marker != c.dep.marker && !c.movingHere(rep.Val.Marker):
			errs = append(errs, c.mismatch(rep.Node, rep.Val.Marker, false))
		default:
			out[rep.Node] = rep.Val
		}
	}
	if len(replies) < n && ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if errs != nil {
		return nil, errors.Join(append([]error{errors.New("redlock: Bootstrap refused: every node must answer with no other settings; nothing was written")}, errs...)...)
	}
	return out, nil
}

// inUse starts (or goes on with) the ordinary quarantine of each node in
// nodes and reports when each ends: nil if that admitted them all.
func (c *Client) inUse(ctx context.Context, nodes []int) error {
	type res struct {
		ok   bool
		left time.Duration
	}
	r := quorum.Start(nil, ctx, len(nodes), func(ctx context.Context, k int) (res, error) {
		ok, left, err := c.admit.step(ctx, nodes[k])
		if !ok && err == nil {
			c.admit.kick(nodes[k])
		}
		return res{ok, left}, err
	})
	replies := r.Await(ctx, len(nodes), func(quorum.Reply[res]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() })
	e := &NotNewError{}
	got := make([]bool, len(nodes))
	for _, rep := range replies {
		got[rep.Node] = true
		i := nodes[rep.Node]
		switch {
		case errors.Is(rep.Err, ErrConfigMismatch):
			return rep.Err
		case rep.Err != nil:
			e.Nodes = append(e.Nodes, QuarantinedNode{Node: i, Addr: c.nodes[i].name, Err: rep.Err})
		case !rep.Val.ok:
			e.Nodes = append(e.Nodes, QuarantinedNode{Node: i, Addr: c.nodes[i].name, Left: max(rep.Val.left, 0)})
		}
	}
	for k, ok := range got {
		if !ok {
			i := nodes[k]
			e.Nodes = append(e.Nodes, QuarantinedNode{Node: i, Addr: c.nodes[i].name, Err: ctx.Err()})
		}
	}
	if len(e.Nodes) == 0 {
		return nil
	}
	return e
}

// errTaken is a claim round that found a node admitted, or carrying
// someone else's pending mark.
var errTaken = errors.New("redlock: a node was used since Bootstrap read it")

// slowClaim is a claim round that took longer than a bootstrap may.
type slowClaim struct{ took time.Duration }

func (e *slowClaim) Error() string { return fmt.Sprintf("claims took %v", e.took) }

// claim writes this Bootstrap's claim (id) on every node, all within w on
// this client's clock, or returns why not.
func (c *Client) claim(ctx context.Context, id string, w time.Duration) error {
	n := len(c.nodes)
	start := c.cfg.clock.Now()
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (script.BootstrapStatus, error) {
		return c.nodes[i].sn.Claim(ctx, script.ClaimArgs{Settings: c.dep.marker, ID: id,
			Quarantine: c.dep.quarantine(), TTL: c.dep.pendingTTL()})
	})
	replies := r.Await(ctx, n, func(quorum.Reply[script.BootstrapStatus]) bool { return true })
	took := c.cfg.clock.Now().Sub(start)
	r.Cancel()
	c.spawn(func() { r.Wait() })
	var errs []error
	var taken bool
	for _, rep := range replies {
		switch {
		case rep.Err != nil:
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
		case rep.Val == script.BootstrapMismatch:
			return c.mismatch(rep.Node, "(admitted meanwhile under other settings)", false)
		case rep.Val != script.BootstrapDone:
			taken = true
		}
	}
	if taken {
		return errTaken
	}
	if len(replies) < n && ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if errs != nil {
		return errors.Join(append([]error{errors.New("redlock: Bootstrap refused: a node did not take its claim (the claimed nodes serve an ordinary quarantine)")}, errs...)...)
	}
	if took > w {
		return &slowClaim{took: took}
	}
	return nil
}

// admitClaimed admits every node that still carries this Bootstrap's claim
// id, no older than w on the node's clock.
func (c *Client) admitClaimed(ctx context.Context, id string, w time.Duration) error {
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (script.BootstrapStatus, error) {
		return c.nodes[i].sn.AdmitClaimed(ctx, script.ClaimedArgs{Settings: c.dep.marker, ID: id, Window: w})
	})
	replies := r.Await(ctx, n, func(quorum.Reply[script.BootstrapStatus]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() })
	var admitted int
	var errs []error
	for _, rep := range replies {
		switch {
		case rep.Err != nil:
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
		case rep.Val == script.BootstrapDone || rep.Val == script.BootstrapAlready:
			admitted++
			c.admit.saw(rep.Node)
		case rep.Val == script.BootstrapMismatch:
			errs = append(errs, c.mismatch(rep.Node, "(admitted meanwhile under other settings)", false))
		default:
			errs = append(errs, c.nodeErr(rep.Node, errors.New("not admitted: it lost its data (or its claim grew too old) since Bootstrap claimed it; it serves an ordinary quarantine")))
		}
	}
	if admitted < n {
		if len(replies) < n && ctx.Err() != nil {
			errs = append(errs, ctx.Err())
		}
		return errors.Join(append([]error{fmt.Errorf("redlock: Bootstrap admitted %d of %d nodes", admitted, n)}, errs...)...)
	}
	c.cfg.logger.Info("redlock: deployment bootstrapped", "nodes", n, "settings", c.dep.marker)
	return nil
}

// Reconfigure moves a live deployment from its old nodes and settings to
// this client's nodes and settings without an overlap: from lists the old
// nodes (in any order, under any names), and opts give the old settings
// as the old clients were built with them (WithMaxTTL, WithDriftFactor;
// other options are ignored). With no opts, the old settings are read
// from the old nodes: the settings they were admitted with, or, on nodes
// that a change left marked, that change's old settings (a rerun), and
// every old node that answers must agree. The nodes may differ by any number of
// additions, removals or replacements; a node in both lists keeps its
// data.
//
// It marks the old nodes so that clients of the old settings are refused
// (ErrConfigMismatch, at once), then stamps a hold-off of the longer of
// the two quarantines on each new node, waits it out and admits the new
// nodes with the new settings. From the first step until the hold-off
// ends (one max(Q_old, Q_new) plus a few round trips) no client gets a
// lock; clients of the new settings get ReasonQuarantine with the time
// left and admit the nodes themselves when it ends, whether Reconfigure
// is still waiting or not. Every lease of the old settings is over by then.
//
// It writes nothing unless every node answers with a state it can move
// (the old settings, the new ones, a quarantine, an earlier run's marks)
// and enough old nodes answer to refuse the old settings on all but a
// minority (with unchanged settings, every node that leaves). It returns
// nil once every node of both lists is done; otherwise an error that
// matches ErrReconfigureIncomplete (run it again: it is idempotent and
// keeps the hold-offs already stamped), or a *ConfigError when a node
// belongs to another deployment. ctx bounds the whole call, the wait
// included. Safe for concurrent use, but run one reconfiguration at a time.
func (c *Client) Reconfigure(ctx context.Context, from []redis.UniversalClient, opts ...Option) error {
	if c.isClosed() {
		return ErrClosed
	}
	if !c.cfg.quarantine {
		return errors.New("redlock: Reconfigure: a client built without the restart quarantine (a lab switch) keeps no settings on the nodes")
	}
	old, err := oldSettings(from, opts)
	if err != nil {
		return err
	}
	readFrom := len(opts) == 0
	olds := make([]*node, len(from))
	for i, uc := range from {
		if err := checkNodeClient(uc); err != nil {
			return fmt.Errorf("redlock: Reconfigure: old node %d: %w", i, err)
		}
		conn := redisconn.New(uc)
		olds[i] = &node{idx: i, name: addrOf(conn, i), conn: conn, sn: script.NewNode(conn, c.cfg.cleanup)}
	}
	r := &reconfig{c: c, olds: olds, from: old.String(), to: c.dep.marker, holdOff: max(old.quarantine(), c.dep.quarantine()), readFrom: readFrom}
	return r.run(ctx)
}
