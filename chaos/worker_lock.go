package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/election"
)

// redlockService is a redlock client over the worker's proxies to the
// nodes.
type redlockService struct {
	lc      *redlock.Client
	release func()
}

func newRedlockService(cfg workerConfig) (*redlockService, error) {
	if len(cfg.Nodes) == 0 || len(cfg.Nodes) != len(cfg.Dial) {
		return nil, errors.New("chaos worker: nodes and dial addresses do not match")
	}
	lc, release, err := newLockClient(cfg)
	if err != nil {
		return nil, err
	}
	return &redlockService{lc: lc, release: release}, nil
}

func (r *redlockService) close()              { r.release() }
func (r *redlockService) recordsItself() bool { return false }
func (r *redlockService) attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error) {
	if w.cfg.Bootstrap {
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		err := r.lc.Bootstrap(bctx)
		cancel()
		w.bootstraps++
		if err != nil {
			w.bootstrapErrs++
		}
	}
	return w.attempt(ctx, r.lc, s)
}

// newLockClient is the worker's redlock client over its proxies to the
// nodes (each node keeps its own address as its identity), with the
// options the run asks for. release closes it and its connections.
func newLockClient(cfg workerConfig) (lc *redlock.Client, release func(), err error) {
	ttl := time.Duration(cfg.TTLms) * time.Millisecond
	clients := make([]redis.UniversalClient, len(cfg.Nodes))
	nodes, dials := slices.Clone(cfg.Nodes), slices.Clone(cfg.Dial)
	var aliasUp time.Time
	if cfg.AliasDownMs > 0 && len(nodes) > 1 {
		last := len(nodes) - 1
		_, port, _ := strings.Cut(nodes[0], ":")
		nodes[last], dials[last] = "node-0-alias.fleet.internal:"+port, dials[0]
		aliasUp = time.Now().Add(time.Duration(cfg.AliasDownMs) * time.Millisecond)
	}
	for i := range nodes {
		dial, alias := dials[i], !aliasUp.IsZero() && i == len(nodes)-1
		clients[i] = redis.NewClient(&redis.Options{
			Network: cfg.Network,
			Addr:    nodes[i],
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				if alias && time.Now().Before(aliasUp) {
					return nil, errors.New("connection refused (the alias is not reachable yet)")
				}
				var d net.Dialer
				return d.DialContext(ctx, network, dial)
			},
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialTimeout:           500 * time.Millisecond,
			ReadTimeout:           time.Second,
			WriteTimeout:          time.Second,
			PoolSize:              4,
			PoolTimeout:           time.Second,
		})
	}
	closeClients := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	maxTTL := ttl
	if cfg.MaxTTLms > 0 {
		maxTTL = time.Duration(cfg.MaxTTLms) * time.Millisecond
	}
	opts := []redlock.Option{redlock.WithMaxTTL(maxTTL)}
	if cfg.Drift > 0 {
		opts = append(opts, redlock.WithDriftFactor(cfg.Drift))
	}
	if cfg.Fencing != "none" {
		opts = append(opts, redlock.WithFencing())
	}
	if cfg.NodeMs > 0 {
		opts = append(opts, redlock.WithNodeTimeout(time.Duration(cfg.NodeMs)*time.Millisecond))
	}
	if cfg.NoQuar {
		opts = append(opts, withoutQuarantine())
	}
	if cfg.HoldMs > 0 {
		opts = append(opts, redlock.WithMaxHold(time.Duration(cfg.HoldMs)*time.Millisecond))
	}
	lc, err = redlock.New(clients, opts...)
	if err != nil {
		closeClients()
		return nil, nil, fmt.Errorf("chaos worker: %w", err)
	}
	return lc, func() { lc.Close(); closeClients() }, nil
}

// attempt takes the lock and runs one section under it. With a hold cap
// the section runs under Do, which keeps the lease extended up to the
// cap; in the transfers style under a lease on two accounts; otherwise
// under a plain lease (or a leadership, in the election style) released
// afterwards.
func (w *worker) attempt(ctx context.Context, lc *redlock.Client, s *section) (attemptOutcome, error) {
	ttl := time.Duration(w.cfg.TTLms) * time.Millisecond
	lockWait := time.Duration(w.cfg.LockMs) * time.Millisecond
	if w.cfg.UntilNs > 0 {
		// A timed worker does not wait for the lock past its time.
		lockWait = min(lockWait, time.Duration(w.cfg.UntilNs-stampNs()))
	}
	lctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	if w.cfg.Style == styleTransfers {
		return w.attemptTransfer(ctx, lctx, lc, ttl, s)
	}
	if w.cfg.HoldMs > 0 || (w.cfg.Style != "" && w.cfg.Style != styleElection) {
		return w.attemptDo(ctx, lctx, lc, ttl, s)
	}
	var lease *redlock.Lease
	var err error
	if w.cfg.Style == styleElection {
		lease, err = w.campaign(lctx, lc, ttl)
	} else {
		lease, err = w.lock(lctx, lc, ttl)
	}
	if err != nil {
		return outcomeNotLocked, err
	}
	outcome, err := w.section(ctx, lease, s)
	s.heldNs = stampNs()
	_ = lease.Release(context.WithoutCancel(ctx))
	s.releaseNs = stampNs()
	return outcome, err
}

// attemptDo runs the section under Do. In the do-panic style fn panics
// now and then after the section; the worker recovers, as a server's
// request handler would, and the next section must still get the lock.
func (w *worker) attemptDo(ctx, lctx context.Context, lc *redlock.Client, ttl time.Duration, s *section) (outcome attemptOutcome, err error) {
	var serr error
	defer func() {
		if p := recover(); p != nil {
			if p != errPanic {
				panic(p)
			}
			s.panicked = true
			s.releaseNs = stampNs()
			outcome, err = s.outcome, serr
		}
	}()
	// The section ignores the context Do cancels when the lease ends: a
	// hung worker does not look at it either.
	err = lc.Do(lctx, w.cfg.Key, ttl, func(_ context.Context, lease *redlock.Lease) error {
		outcome, serr = w.section(ctx, lease, s)
		s.heldNs = stampNs()
		if w.cfg.Style == styleDoPanic && w.rng.IntN(4) == 0 {
			s.outcome = outcome
			panic(errPanic)
		}
		return serr
	})
	s.releaseNs = stampNs()
	if outcome != outcomeNotLocked {
		err = serr // a lost lease is what the scenario is about, not an error
	}
	return outcome, err
}

// campaign takes the lock as a candidate in the election named after the
// key: the leadership is a lease kept renewed by the Client, whose fencing
// token is the term, so the run's checks of lease windows and tokens are
// the election's (at most one valid leader at a time, terms that only
// grow). Releasing it afterwards is resigning.
func (w *worker) campaign(ctx context.Context, lc *redlock.Client, ttl time.Duration) (*redlock.Lease, error) {
	e, err := election.New(lc, w.cfg.Key, ttl)
	if err != nil {
		return nil, err
	}
	return e.Campaign(ctx, fmt.Sprintf("worker-%d", w.cfg.ID))
}

// errPanic is what fn panics with in the do-panic style.
var errPanic = errors.New("chaos worker: panic in fn (on purpose)")

// extend is the do-extend style's Extend from inside fn, between read and
// write, with a ttl of its own while Do's renewal extends beside it. A
// lease that cannot be extended is not acted on any more.
func (w *worker) extend(ctx context.Context, h held) error {
	lease, ok := h.(*redlock.Lease)
	if w.cfg.Style != styleDoExtend || !ok {
		return nil
	}
	ttl := time.Duration(w.cfg.TTLms) * time.Millisecond
	ttl = ttl/2 + time.Duration(w.rng.Int64N(int64(ttl/2)+1))
	ttl = ttl.Truncate(time.Millisecond)
	w.extends++
	if err := lease.Extend(ctx, ttl); err != nil {
		w.extendErrs++
		return err
	}
	return nil
}

// lock takes the lock with Lock, or, when the worker polls, with TryLock
// and a fixed sleep after each refusal, as a client without release
// notices or a view of the holder's expiry does.
func (w *worker) lock(ctx context.Context, lc *redlock.Client, ttl time.Duration) (*redlock.Lease, error) {
	if w.cfg.PollMs <= 0 {
		return lc.Lock(ctx, w.cfg.Key, ttl)
	}
	for {
		lease, err := lc.TryLock(ctx, w.cfg.Key, ttl)
		if err == nil || !errors.Is(err, redlock.ErrNotObtained) {
			return lease, err
		}
		w.polls++
		t := time.NewTimer(time.Duration(w.cfg.PollMs) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		}
	}
}
