package redlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The fencing token of a lease: computed from what the acquire round read
// and committed to a quorum before the lease is handed out, so that every
// later holder of the key gets a larger one (docs/fencing.md proves it).
// This file is the Go home of that rule; commit.lua holds its node side.

// fenceToken is the token rule (script.Token, shared with the model
// checker; docs/fencing.md, "The protocol"): one
// more than the largest fence the acquire round read, and at least the
// largest server time it read, in µs. The fences make tokens increase
// while the nodes keep their data; the time floor keeps them increasing
// across a node that lost its fence (a restart without persistence, or a
// fence that expired). Every node that granted or found the key held read
// its fence and clock, and each counts. It fails when the token would not
// fit a PostgreSQL bigint.
func fenceToken(key string, replies []quorum.Reply[script.AcquireReply]) (uint64, error) {
	rs := make([]script.AcquireReply, 0, len(replies))
	for _, r := range replies {
		if r.Err == nil {
			rs = append(rs, r.Val)
		}
	}
	token, maxFence, floor, ok := script.Token(rs)
	if !ok {
		return 0, fmt.Errorf("redlock: fence for %s would pass the largest PostgreSQL bigint (fence %d, server time %d µs)", keyText(key), maxFence, floor)
	}
	return token, nil
}

const maxToken = script.MaxToken

// commit is the fencing round (docs/fencing.md, "The protocol"): the
// token (fenceToken) is raised on every node where our key still holds
// our value, and is usable only with a quorum of commits. The validity is
// recomputed to the end of this round.
func (a *attempt) commit(ctx context.Context) {
	c := a.c
	defer func() { a.elapsed = c.cfg.clock.Now().Sub(a.t0) }()
	token, err := fenceToken(a.key, a.replies)
	if err != nil {
		a.fail(err)
		return
	}
	p := script.NewCommit(script.CommitArgs{Key: a.key, Value: a.value, Token: token, Keep: c.set.fenceKeep(a.ttl)})

	// Like the acquire round, commits to the nodes that did not count
	// still go out after success: a fence raised on more nodes survives
	// more restarts.
	// A commit counts only from the server its node was verified on, as
	// this round reads the proven ids (identity.go).
	proven := c.ident.proven()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(a.ttl))
	round := quorum.Start(c.pool, rctx, len(c.nodes), func(ctx context.Context, i int) (script.CommitReply, error) {
		r, err := p.Run(ctx, c.nodes[i].sn)
		c.observe(i, err)
		if err == nil && c.moved(proven, i, r.Ident) {
			c.proveSoon(a.ttl)
		}
		return r, err
	})
	wctx, wcancel := context.WithTimeout(ctx, c.nodeTimeout(a.ttl))
	counts := func(r quorum.Reply[script.CommitReply]) bool {
		return r.Err == nil && r.Val.Committed && script.SameServer(proven[r.Node], r.Val.Ident)
	}
	got := round.Await(wctx, c.quorum, counts)
	wcancel()
	c.spawn(func() {
		defer cancel()
		round.Wait()
	})
	var yes int
	var errs []error
	for _, r := range got {
		switch {
		case r.Err != nil:
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("fence commit: %w", r.Err)))
		case counts(r):
			yes++
		case r.Val.Committed:
			errs = append(errs, c.nodeErr(r.Node, fmt.Errorf("fence commit: %w", errUnverified)))
		default:
			errs = append(errs, c.nodeErr(r.Node, errors.New("fence commit: key no longer ours")))
		}
	}
	if yes < c.quorum {
		a.fail(errors.Join(append([]error{fmt.Errorf("fence commit reached %d of %d nodes, %d needed", yes, len(c.nodes), c.quorum)}, errs...)...))
		return
	}
	a.token = token
}

// fail marks the attempt failed by its fencing step.
func (a *attempt) fail(err error) {
	a.fenceErr = true
	a.errs = append(a.errs, err)
}
