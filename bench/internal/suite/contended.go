package suite

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/redlock"
)

// Contenders is the number of goroutines competing for one key.
const Contenders = 8

type lockFn func(ctx context.Context) (release func(context.Context) error, err error)

// acq is one acquisition, as offsets from the block's start.
type acq struct {
	g                       int
	called, locked, release time.Duration
}

// contender is one implementation's part in the contended scenario.
type contender struct {
	scenario, name, variant string
	lockers                 func(key string) []lockFn // one per goroutine
	handoffs, waits, locks  []time.Duration           // waits: Lock calls handed the lock by another goroutine, or cut off by the block's end
	censored                int
	waiterAcqs, total       int
	active                  time.Duration
	allocs                  uint64
	calls                   int64
	overlaps, errs          int
	firstErr                error
}

// HandOffVariant is the contended-separate row whose Clients are built
// WithKeyHandOff (a release hands the key to the first waiter).
const HandOffVariant = "8 Clients, WithKeyHandOff"

// contended runs 8 goroutines looping Lock, a counter increment, Release on
// one key, for quorumlock (one Client shared by the goroutines, as in one
// service), quorumlock with one Client (and its own connections) per
// goroutine (as 8 processes, woken through Pub/Sub), and redsync (one Mutex
// per goroutine over shared pools), interleaved in blocks.
func contended(ctx context.Context, cfg Config, _ []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	ql, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer ql.Close()
	sep, hand := make([]*impl.QL, Contenders), make([]*impl.QL, Contenders)
	for g := range sep {
		if sep[g], err = impl.NewQL(impl.Clients(addrs), true, cfg.TTL); err != nil {
			return nil, err
		}
		defer sep[g].Close()
		if hand[g], err = impl.NewQL(impl.Clients(addrs), true, cfg.TTL, redlock.WithKeyHandOff()); err != nil {
			return nil, err
		}
		defer hand[g].Close()
	}
	rs := impl.NewRS(impl.Clients(addrs), cfg.TTL)
	defer rs.Close()

	all := []*contender{
		{scenario: Contended, name: impl.Quorumlock, variant: "one Client, 8 goroutines", lockers: func(key string) []lockFn {
			fs := make([]lockFn, Contenders)
			for g := range fs {
				fs[g] = func(ctx context.Context) (func(context.Context) error, error) { return ql.Lock(ctx, key) }
			}
			return fs
		}},
		{scenario: Contended, name: impl.Redsync, variant: "one Mutex per goroutine", lockers: func(key string) []lockFn {
			fs := make([]lockFn, Contenders)
			for g := range fs {
				m := rs.NewMutex(key)
				fs[g] = func(ctx context.Context) (func(context.Context) error, error) {
					if err := m.LockContext(ctx); err != nil {
						return nil, err
					}
					return func(ctx context.Context) error { _, err := m.UnlockContext(ctx); return err }, nil
				}
			}
			return fs
		}},
		{scenario: ContendedSeparate, name: impl.Quorumlock, variant: "8 Clients, own connections", lockers: func(key string) []lockFn {
			fs := make([]lockFn, Contenders)
			for g := range fs {
				fs[g] = func(ctx context.Context) (func(context.Context) error, error) { return sep[g].Lock(ctx, key) }
			}
			return fs
		}},
		{scenario: ContendedSeparate, name: impl.Quorumlock, variant: HandOffVariant, lockers: func(key string) []lockFn {
			fs := make([]lockFn, Contenders)
			for g := range fs {
				fs[g] = func(ctx context.Context) (func(context.Context) error, error) { return hand[g].Lock(ctx, key) }
			}
			return fs
		}},
	}
	// contended-separate alone skips the one-Client row but keeps redsync's,
	// which its targets compare with.
	var cs []*contender
	for _, c := range all {
		if c.scenario == Contended && c.name == impl.Quorumlock && !cfg.want(Contended) {
			continue
		}
		cs = append(cs, c)
	}
	blocks, dur := pick(cfg, 2, 4), pick(cfg, 1500*time.Millisecond, 2500*time.Millisecond)
	for b := range blocks {
		for k := range cs {
			c := cs[(b+k)%len(cs)]
			if ctx.Err() != nil {
				break
			}
			c.block(ctx, fmt.Sprintf("%s:%s:%s:%d", key, c.scenario, c.name, b), dur)
		}
	}
	var out []Result
	for _, c := range cs {
		out = append(out, c.result())
	}
	return out, ctx.Err()
}

func (c *contender) block(ctx context.Context, key string, dur time.Duration) {
	fs := c.lockers(key)
	bctx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	var holders atomic.Int32
	var overlaps atomic.Int32
	var counter int
	per := make([][]acq, len(fs))
	var mu sync.Mutex
	var errs int
	var firstErr error
	var censored []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	a0, c0 := allocs(), impl.Calls()
	for g, lock := range fs {
		wg.Go(func() {
			for bctx.Err() == nil {
				called := time.Since(start)
				rel, err := lock(bctx)
				if err != nil {
					if bctx.Err() != nil {
						// Still waiting when the block ended: a waiter whose
						// wait is at least this long.
						mu.Lock()
						censored = append(censored, time.Since(start)-called)
						mu.Unlock()
					} else {
						mu.Lock()
						errs++
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
					}
					continue
				}
				locked := time.Since(start)
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				counter++ // the critical section; the race detector would flag an overlap
				holders.Add(-1)
				err = rel(context.Background())
				released := time.Since(start)
				if err != nil {
					mu.Lock()
					errs++
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				per[g] = append(per[g], acq{g: g, called: called, locked: locked, release: released})
			}
		})
	}
	wg.Wait()
	c.allocs += allocs() - a0
	c.calls += impl.Calls() - c0
	c.active += dur
	c.overlaps += int(overlaps.Load())
	c.errs += errs
	if c.firstErr == nil {
		c.firstErr = firstErr
	}
	var all []acq
	for _, p := range per {
		all = append(all, p...)
	}
	slices.SortFunc(all, func(a, b acq) int { return int(a.locked - b.locked) })
	for i, a := range all {
		c.locks = append(c.locks, a.locked-a.called)
		if i == 0 {
			continue
		}
		prev := all[i-1]
		c.handoffs = append(c.handoffs, a.locked-prev.release)
		if a.g != prev.g {
			c.waiterAcqs++
			c.waits = append(c.waits, a.locked-a.called)
		}
	}
	c.waits = append(c.waits, censored...)
	c.censored += len(censored)
	c.total += len(all)
}

func (c *contender) result() Result {
	r := Result{Scenario: c.scenario, Impl: c.name, Variant: c.variant, Samples: c.total, Errors: c.errs, Overlaps: ptr(c.overlaps)}
	if c.firstErr != nil {
		r.FirstError = c.firstErr.Error()
	}
	if c.total == 0 {
		return r
	}
	r.OpsPerSec = float64(c.total) / c.active.Seconds()
	r.AllocsPerOp = ptr(float64(c.allocs) / float64(c.total))
	if c.calls > 0 {
		r.CallsPerOp = ptr(float64(c.calls) / float64(c.total))
	}
	if len(c.handoffs) > 0 {
		r.P50us = us(pct(c.handoffs, 0.50))
		r.P99us = us(pct(c.handoffs, 0.99))
		r.HandoffP50us = ptr(r.P50us)
		r.HandoffP95us = ptr(us(pct(c.handoffs, 0.95)))
		r.WaiterShare = ptr(float64(c.waiterAcqs) / float64(len(c.handoffs)))
	}
	if len(c.waits) > 0 {
		r.WaiterP50us = ptr(us(pct(c.waits, 0.50)))
		r.WaiterP99us = ptr(us(pct(c.waits, 0.99)))
		r.WaiterMaxUs = ptr(us(c.waits[len(c.waits)-1]))
		r.Waiters = ptr(len(c.waits))
		r.WaitersCutOff = ptr(c.censored)
	}
	r.LockP50us = ptr(us(pct(c.locks, 0.50)))
	r.LockP99us = ptr(us(pct(c.locks, 0.99)))
	r.MaxUs = us(c.locks[len(c.locks)-1])
	return r
}
