// Package election elects one leader among the processes that campaign
// under one name, on redlock's leases: the leader holds a lease on the
// election's key, kept renewed, and its term is the lease's fencing token,
// which only grows from one leader to the next. The line of waiters that
// Lock keeps makes the candidates lead in the order they campaigned.
//
// A leadership is a *redlock.Lease and nothing more: Done closes when it
// ends (the lease was lost, ran out, or was released), FencingToken is the
// term to carry into every write the leader makes, and Release resigns.
// Leader and Observe tell the other processes who leads, for routing and
// display; they read a snapshot, so a process must never decide from them
// that it may act as the leader (its own lease says that).
//
// What this does not do: a process that stops while it leads keeps the
// leadership until its lease's ttl runs out (a frozen leader cannot be
// told apart from a slow one); and there is no "quorumlock run --leader":
// `quorumlock run --key K --fence` already runs a command only while it
// holds K, starting the next waiter's command when it exits, which is
// leader election for a command (docs/election.md).
package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// ErrNoLeader says that nobody leads: a majority of the nodes answered and
// none of them names a leader that a majority holds.
var ErrNoLeader = errors.New("election: no leader")

// Election is one election on one Client: a name, which is the key its
// leader holds, and the ttl of a leadership's lease.
type Election struct {
	c    *redlock.Client
	name string
	ttl  time.Duration
}

// New returns the election called name on c, whose leaders hold a lease of
// ttl kept renewed (a leader that stops renewing leads for at most about
// ttl more). name is a key: it must pass redlock.CheckKey, and ttl the
// Client's CheckTTL. It touches no node.
func New(c *redlock.Client, name string, ttl time.Duration) (*Election, error) {
	if c == nil {
		return nil, errors.New("election: nil Client")
	}
	if err := redlock.CheckKey(name); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	if err := c.CheckTTL(ttl); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	return &Election{c: c, name: name, ttl: ttl}, nil
}

// Name is the election's name, the key its leader holds.
func (e *Election) Name() string { return e.name }

// Campaign waits until the caller leads, or ctx ends, and returns its
// leadership: a lease on the election's key with a fencing token (the
// term), kept renewed until it is released (resigning) or lost. value
// (at most redlock.MaxMetadata bytes) is what Leader and Observe report
// for this leader, say its address. opts are Lock's call options, for
// example redlock.WaitAtMost to stop waiting after a while.
//
// Watch the lease's Done: when it closes, the caller no longer leads and
// must stop acting as the leader at once; it may Campaign again.
func (e *Election) Campaign(ctx context.Context, value string, opts ...redlock.CallOption) (*redlock.Lease, error) {
	if len(value) > redlock.MaxMetadata {
		return nil, fmt.Errorf("election: Campaign: value of %d bytes, more than %d", len(value), redlock.MaxMetadata)
	}
	all := append([]redlock.CallOption{redlock.Fenced(), redlock.WithMetadata(value)}, opts...)
	l, err := e.c.Lock(ctx, e.name, e.ttl, all...)
	if err != nil {
		return nil, err
	}
	l.KeepRenewed()
	return l, nil
}

// Leader is who leads, as the nodes said when they were read.
type Leader struct {
	Value string // what the leader campaigned with
	// Term is its leadership's fencing token. For a moment after a new
	// leader is granted, until its token is committed on the nodes, it
	// reads as the term before; Observe sends the leader again once it
	// reads the new one.
	Term uint64
	// ExpiresIn is how long the leadership lasts unless the leader renews
	// it (it renews every ttl/3 while it runs).
	ExpiresIn time.Duration
}

// Leader reads who leads now. It returns ErrNoLeader when nobody does,
// and an error wrapping redlock.ErrNotObtained's kin (the nodes' errors)
// when too few nodes answered to tell. A snapshot: see the package doc.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	ks, err := e.c.Inspect(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	switch ks.Verdict {
	case redlock.VerdictHeld:
		var term uint64
		for _, ns := range ks.Nodes {
			if ns.Value == ks.Holder {
				term = max(term, ns.Fence)
			}
		}
		return Leader{Value: ks.Metadata, Term: term, ExpiresIn: ks.ExpiresIn}, nil
	case redlock.VerdictFree:
		return Leader{}, ErrNoLeader
	default:
		return Leader{}, fmt.Errorf("election: cannot tell who leads: %s", ks.Summary)
	}
}

// Observe sends who leads each time it changes (another value or another
// term; the zero Leader when nobody leads), reading the nodes every
// interval (ttl/3 when interval is 0), until ctx ends, when it closes the
// channel. The first value is who leads when it starts. Readings that
// cannot tell (too few nodes answered) are skipped. The channel holds one
// value: a reader that falls behind gets the latest.
func (e *Election) Observe(ctx context.Context, interval time.Duration) <-chan Leader {
	if interval <= 0 {
		interval = e.ttl / 3
	}
	ch := make(chan Leader, 1)
	go func() {
		defer close(ch)
		var last Leader
		first := true
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			rctx, cancel := context.WithTimeout(ctx, interval)
			ld, err := e.Leader(rctx)
			cancel()
			if err == nil || errors.Is(err, ErrNoLeader) {
				if first || ld.Value != last.Value || ld.Term != last.Term {
					first, last = false, ld
					select { // keep only the latest for a slow reader
					case <-ch:
					default:
					}
					ch <- ld
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}
