package suite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/redlock"
)

// holdFn takes lease i and keeps it until stop is closed, then gives it
// up. It calls held once the lease is held, and lost when it learns that
// the lease was lost before the end (expired, taken over, or not renewed
// in time). It returns what failed: taking, renewing or releasing.
type holdFn func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error

// qlHold holds leases of ttl under quorumlock's Do on one Client.
func qlHold(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func(), error) {
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl)
		if err != nil {
			return nil, nil, err
		}
		hold := func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error {
			ran, gone := false, false
			err := ql.C.Do(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl, func(fctx context.Context, _ *redlock.Lease) error {
				ran = true
				held()
				select {
				case <-stop:
				case <-fctx.Done():
					// fn's ctx ends early only when the lease is lost, or
					// when the whole run is interrupted.
					if ctx.Err() == nil {
						gone = true
						lost()
					}
				}
				return nil
			})
			if ran && !gone && errors.Is(err, redlock.ErrNotHeld) && ctx.Err() == nil {
				lost() // its validity ran out before the release
			}
			if gone && errors.Is(err, redlock.ErrNotHeld) {
				return nil // counted as lost, not as an error
			}
			return err
		}
		return hold, ql.Close, nil
	}
}

// qlKeep takes leases of ttl with quorumlock's Lock on one Client and
// keeps them with Lease.KeepRenewed: hold returns once the lease is
// held, so no goroutine waits per lease. end, once the window is over,
// counts the leases that ended before it (lost) and releases the rest.
func qlKeep(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func() int, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func() int, func(), error) {
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl)
		if err != nil {
			return nil, nil, nil, err
		}
		var mu sync.Mutex
		var leases []*redlock.Lease
		hold := func(ctx context.Context, i int, held, _ func(), _ <-chan struct{}) error {
			l, err := ql.C.Lock(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl)
			if err != nil {
				return err
			}
			l.KeepRenewed()
			mu.Lock()
			leases = append(leases, l)
			mu.Unlock()
			held()
			return nil
		}
		end := func() int {
			mu.Lock()
			defer mu.Unlock()
			lost := 0
			for _, l := range leases {
				select {
				case <-l.Done():
					lost++
				default:
				}
			}
			work := make(chan *redlock.Lease)
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for l := range work {
						rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						_ = l.Release(rctx) // a lost lease's ErrNotHeld is counted above
						cancel()
					}
				})
			}
			for _, l := range leases {
				work <- l
			}
			close(work)
			wg.Wait()
			return lost
		}
		return hold, end, ql.Close, nil
	}
}

// rsHold holds redsync Mutexes, each extended every renewal period by a
// goroutine of its own, as a redsync user keeps a lock alive.
func rsHold(addrs []string) func(*impl.Trips, string) (holdFn, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func(), error) {
		rs := impl.NewRS(impl.CountedClients(addrs, t), RenewTTL)
		hold := func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error {
			m := rs.NewMutex(fmt.Sprintf("%s:%d", prefix, i))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			held()
			unlock := func() error {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				_, err := m.UnlockContext(uctx)
				return err
			}
			tick := time.NewTicker(RenewPeriod(RenewTTL))
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return unlock()
				case <-ctx.Done():
					return unlock()
				case <-tick.C:
				}
				if ok, err := m.ExtendContext(ctx); !ok || err != nil {
					if ctx.Err() != nil {
						return unlock()
					}
					// Counted as lost, not as an error; the unlock finds
					// nothing of ours, as the lock is gone.
					lost()
					_ = unlock()
					return nil
				}
			}
		}
		return hold, rs.Close, nil
	}
}
