package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/quorumlock/quorum"
)

// ErrNotNew is the reason Bootstrap refuses a node that a client has
// already found without its admission marker: its quarantine is running
// and ends by itself.
var ErrNotNew = errors.New("redlock: a quarantine is already in progress on this node")

// Bootstrap admits every node of a brand-new deployment at once, with this
// client's settings, so that the first lock does not wait one quarantine.
// It is the operator's statement that no lock on these nodes can be live:
// a deployment whose every node lost its data looks exactly like a new one,
// which is why nodes are otherwise quarantined on first use.
//
// It checks, and then admits in one atomic step per node, that every node
// answers and has neither an admission marker with other settings
// (ErrConfigMismatch) nor a quarantine in progress (ErrNotNew: some client
// has found the node without its marker, for example right after the
// nodes were wiped under running clients; that quarantine then ends by
// itself). Nodes already admitted with these settings are left as they are,
// so Bootstrap is idempotent. On error some nodes may have been admitted;
// the others serve a normal quarantine. Safe for concurrent use.
func (c *Client) Bootstrap(ctx context.Context) error {
	if c.isClosed() {
		return ErrClosed
	}
	n := len(c.nodes)
	// First look at every node, so that one refusal admits nothing.
	states := quorum.Start(ctx, n, func(ctx context.Context, i int) (peerState, error) {
		res, err := stateScript.Run(ctx, c.nodes[i].sc, []string{markerKey, pendingKey}).Slice()
		if err != nil {
			return peerState{}, err
		}
		return parseState(res)
	})
	var errs []error
	for _, r := range states.Await(ctx, n, func(quorum.Reply[peerState]) bool { return true }) {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, r.Err))
		case r.Val.marker != "" && r.Val.marker != c.settings:
			errs = append(errs, c.mismatch(r.Node, r.Val.marker, false))
		case r.Val.marker == "" && r.Val.pending != "":
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("%w (settings %q)", ErrNotNew, r.Val.pending)))
		}
	}
	states.Cancel()
	c.spawn(func() { states.Wait() })
	if ctx.Err() != nil {
		errs = append(errs, ctx.Err())
	}
	if errs != nil {
		return errors.Join(append([]error{errors.New("redlock: Bootstrap refused: every node must answer and be unused")}, errs...)...)
	}

	admit := quorum.Start(ctx, n, func(ctx context.Context, i int) (int64, error) {
		return bootstrapScript.Run(ctx, c.nodes[i].sc, []string{markerKey, pendingKey}, c.settings).Int64()
	})
	var admitted int
	for _, r := range admit.Await(ctx, n, func(quorum.Reply[int64]) bool { return true }) {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, r.Err))
		case r.Val == 1 || r.Val == 2:
			admitted++
			c.admit.saw(r.Node)
		case r.Val == stMismatch:
			errs = append(errs, c.mismatch(r.Node, "(admitted meanwhile under other settings)", false))
		default:
			errs = append(errs, c.nodeErr(r.Node, ErrNotNew))
		}
	}
	admit.Cancel()
	c.spawn(func() { admit.Wait() })
	if admitted < n {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
		}
		return errors.Join(append([]error{fmt.Errorf("redlock: Bootstrap admitted %d of %d nodes", admitted, n)}, errs...)...)
	}
	c.cfg.logger.Info("redlock: deployment bootstrapped", "nodes", n, "settings", c.settings)
	return nil
}
