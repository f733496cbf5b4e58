package suite

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/delayproxy"
	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/redlock"
)

// More scenario names.
const (
	TwoDownHealthy    = "two-down-healthy"      // the same clients just before the freeze
	ThreeDownLockCtx  = "three-down-lock-ctx"   // Lock bounded by its ctx
	ThreeDownLockTrys = "three-down-lock-retry" // Lock bounded by WithRetry
)

// SlowDelay is the latency the slow-node scenario adds to one node.
const SlowDelay = 50 * time.Millisecond

// faultTimeout bounds one operation in the fault scenarios, so a hang is
// reported as an error instead of stalling the run.
const faultTimeout = 60 * time.Second

// slowNode puts a proxy that delays requests by 50 ms in front of node 4,
// for every implementation's clients.
func slowNode(ctx context.Context, cfg Config, _ []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	p, err := delayproxy.Start(addrs[4], SlowDelay)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	slow := append(append([]string(nil), addrs[:4]...), p.Addr)

	ql, err := impl.NewQL(impl.Clients(slow), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer ql.Close()
	rs := impl.NewRS(impl.Clients(slow), cfg.TTL)
	defer rs.Close()
	floor := impl.NewFloor(impl.Clients(slow))
	defer floor.Close()

	es := []*entry{
		{scenario: SlowNode, l: floor, key: key + ":floor", ops: pick(cfg, 3, 5), timeout: faultTimeout},
		{scenario: SlowNode, l: rs, key: key + ":redsync", ops: pick(cfg, 3, 5), timeout: faultTimeout},
		{scenario: SlowNode, l: ql, key: key + ":quorumlock", ops: pick(cfg, 100, 300), timeout: faultTimeout},
	}
	warm(ctx, es, 3)
	err = interleave(ctx, es, pick(cfg, 3, 6))
	var out []Result
	for _, e := range es {
		out = append(out, e.result())
	}
	return out, err
}

// twoDown freezes (SIGSTOP) nodes 3 and 4 and runs Lock+Release with
// callers' go-redis clients at default options.
func twoDown(ctx context.Context, cfg Config, ns []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	ql, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	rs := impl.NewRS(impl.Clients(addrs), cfg.TTL)
	defer func() {
		thawAll(ns) // before Close, which waits for calls stuck on the frozen nodes
		ql.Close()
		rs.Close()
	}()
	healthy := &entry{scenario: TwoDownHealthy, variant: "same clients, before the freeze", l: ql, key: key + ":quorumlock", ops: pick(cfg, 300, 1000), timeout: faultTimeout}
	es := []*entry{
		{scenario: TwoDown, variant: "nodes 3,4 SIGSTOPped", l: rs, key: key + ":redsync", ops: 1, timeout: faultTimeout},
		{scenario: TwoDown, variant: "nodes 3,4 SIGSTOPped", l: ql, key: key + ":quorumlock", ops: pick(cfg, 100, 300), timeout: faultTimeout},
	}
	warm(ctx, append(es, healthy), 20)
	if err := interleave(ctx, []*entry{healthy}, 1); err != nil {
		return nil, err
	}
	for _, i := range []int{3, 4} {
		if err := ns[i].Pause(); err != nil {
			return nil, err
		}
	}
	err = interleave(ctx, es, pick(cfg, 1, 4))
	out := []Result{healthy.result()}
	for _, e := range es {
		out = append(out, e.result())
	}
	return out, err
}

// threeDown freezes nodes 2, 3 and 4: no quorum is possible. It measures
// how long a failing TryLock takes, and that Lock returns when its ctx or
// its retry policy says so.
func threeDown(ctx context.Context, cfg Config, ns []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	ql, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	const attempts = 3
	qr, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL,
		redlock.WithRetry(func(int) time.Duration { return 50 * time.Millisecond }, attempts))
	if err != nil {
		return nil, err
	}
	rs := impl.NewRS(impl.Clients(addrs), cfg.TTL)
	defer func() {
		thawAll(ns)
		ql.Close()
		qr.Close()
		rs.Close()
	}()
	warm(ctx, []*entry{{l: ql, key: key}, {l: qr, key: key}, {l: rs, key: key}}, 20)
	for _, i := range []int{2, 3, 4} {
		if err := ns[i].Pause(); err != nil {
			return nil, err
		}
	}

	// Every call here is expected to fail; its latency is what we measure.
	timed := func(s *sampler, f func(context.Context) error, within time.Duration) {
		cctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		t0 := time.Now()
		err := f(cctx)
		d := time.Since(t0)
		if err == nil {
			s.fail(errors.New("obtained a lock with 3 of 5 nodes frozen"))
			return
		}
		s.lat = append(s.lat, d)
		if s.first == nil {
			s.first = err
		}
	}
	const lockCtx = 2 * time.Second
	var qTry, qCtx, qRetry, rTry, rCtx sampler
	for i := range pick(cfg, 5, 10) {
		if ctx.Err() != nil {
			break
		}
		timed(&qTry, func(c context.Context) error {
			_, err := ql.C.TryLock(c, fmt.Sprintf("%s:try:%d", key, i), cfg.TTL)
			return err
		}, faultTimeout)
	}
	for range pick(cfg, 1, 3) {
		timed(&qCtx, func(c context.Context) error {
			_, err := ql.C.Lock(c, key+":ctx", cfg.TTL)
			return err
		}, lockCtx)
		timed(&qRetry, func(c context.Context) error {
			_, err := qr.C.Lock(c, key+":retry", cfg.TTL)
			return err
		}, faultTimeout)
	}
	for range pick(cfg, 1, 2) {
		timed(&rTry, func(c context.Context) error {
			return rs.NewMutex(key + ":rs-try").TryLockContext(c)
		}, faultTimeout)
	}
	if !cfg.Quick {
		timed(&rCtx, func(c context.Context) error {
			return rs.NewMutex(key + ":rs-ctx").LockContext(c)
		}, lockCtx)
	}
	res := func(s *sampler, scenario, name, variant string) Result {
		r := s.result(scenario, name)
		r.Variant = variant
		return r
	}
	out := []Result{
		res(&qTry, ThreeDown, "quorumlock", "TryLock"),
		res(&rTry, ThreeDown, "redsync", "TryLockContext"),
		res(&qCtx, ThreeDownLockCtx, "quorumlock", fmt.Sprintf("Lock, ctx %v", lockCtx)),
		res(&qRetry, ThreeDownLockTrys, "quorumlock", fmt.Sprintf("Lock, WithRetry(50ms, %d)", attempts)),
	}
	if !cfg.Quick {
		out = append(out, res(&rCtx, ThreeDownLockCtx, "redsync", fmt.Sprintf("LockContext, ctx %v", lockCtx)))
	}
	return out, ctx.Err()
}

// thawAll resumes every node (SIGCONT; a no-op on one that was not
// frozen). A node that cannot be signalled is stopped or gone, and the
// scenario that needs it reports that.
func thawAll(ns []*servers.RedisProcess) {
	for _, n := range ns {
		_ = n.Resume()
	}
}
