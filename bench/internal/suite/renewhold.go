package suite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/redlock"
)

// holdFn takes lease i and keeps it until stop is closed, then gives it
// up. It calls held once the lease is held, and lost, with what ended it,
// when it learns that the lease was lost before the end (expired, taken
// over, or not renewed in time). It returns what failed: taking, renewing
// or releasing.
type holdFn func(ctx context.Context, i int, held func(), lost func(why string), stop <-chan struct{}) error

// qlHold holds leases of ttl under quorumlock's Do on one Client. Its
// second result counts the leases whose validity ran out after fn
// returned, before Do's release went out (Do's Warn): no loss, but the
// sign of a process too busy to send its releases in time.
func qlHold(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func() int, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func() int, func(), error) {
		late := &warnCounter{msg: "redlock: Do's lease ran out after fn returned"}
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl, redlock.WithLogger(slog.New(late)))
		if err != nil {
			return nil, nil, nil, err
		}
		hold := func(ctx context.Context, i int, held func(), lost func(string), stop <-chan struct{}) error {
			ran, gone := false, false
			key := fmt.Sprintf("%s:%d", prefix, i)
			err := ql.C.Do(ctx, key, ttl, func(fctx context.Context, _ *redlock.Lease) error {
				ran = true
				held()
				select {
				case <-stop:
				case <-fctx.Done():
					// fn's ctx ends early only when the lease is lost, or
					// when the whole run is interrupted.
					if ctx.Err() == nil {
						gone = true
						lost(lossReason(context.Cause(fctx), key))
					}
				}
				return nil
			})
			if ran && !gone && errors.Is(err, redlock.ErrNotHeld) && ctx.Err() == nil {
				lost(lossReason(err, key)) // its validity ran out before the release
			}
			if gone && errors.Is(err, redlock.ErrNotHeld) {
				return nil // counted as lost, not as an error
			}
			return err
		}
		return hold, func() int { return int(late.n.Load()) }, ql.Close, nil
	}
}

// warnCounter is a slog.Handler that counts the Warn records whose
// message starts with msg, and drops every record.
type warnCounter struct {
	msg string
	n   atomic.Int64
}

func (w *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, w.msg) {
		w.n.Add(1)
	}
	return nil
}

func (w *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnCounter) WithGroup(string) slog.Handler      { return w }

// qlKeep takes leases of ttl with quorumlock's Lock on one Client and
// keeps them with Lease.KeepRenewed: hold returns once the lease is
// held, so no goroutine waits per lease. end, once the window is over,
// counts the leases that ended before it (lost, each with what its
// Release said) and releases the rest.
func qlKeep(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func() []string, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func() []string, func(), error) {
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl)
		if err != nil {
			return nil, nil, nil, err
		}
		var mu sync.Mutex
		var leases []*redlock.Lease
		hold := func(ctx context.Context, i int, held func(), _ func(string), _ <-chan struct{}) error {
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
		end := func() []string {
			mu.Lock()
			defer mu.Unlock()
			ended := make(map[*redlock.Lease]bool)
			for _, l := range leases {
				select {
				case <-l.Done():
					ended[l] = true
				default:
				}
			}
			var lmu sync.Mutex
			var lost []string
			work := make(chan *redlock.Lease)
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for l := range work {
						rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						err := l.Release(rctx)
						cancel()
						if ended[l] {
							// What Release says of a lease that had ended
							// is all a KeepRenewed caller learns of why.
							lmu.Lock()
							lost = append(lost, lossReason(err, l.Key()))
							lmu.Unlock()
						}
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
func rsHold(addrs []string) func(*impl.Trips, string) (holdFn, func() int, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func() int, func(), error) {
		rs := impl.NewRS(impl.CountedClients(addrs, t), RenewTTL)
		hold := func(ctx context.Context, i int, held func(), lost func(string), stop <-chan struct{}) error {
			key := fmt.Sprintf("%s:%d", prefix, i)
			m := rs.NewMutex(key)
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
					if err == nil {
						err = errors.New("extend refused")
					}
					lost(lossReason(err, key))
					_ = unlock()
					return nil
				}
			}
		}
		return hold, nil, rs.Close, nil
	}
}

// quotedKey matches a key as the library's messages quote it: in full,
// or its start followed by its length.
var quotedKey = regexp.MustCompile(`"(?:[^"\\]|\\.)*"(?:\.\.\. \(\d+ bytes\))?`)

// lossReason is what ended a lease, as the bench reports it: err's text
// with the lease's key (quoted, and maybe shortened) put as KEY, so that
// the leases lost for one reason count together, cut at 300 bytes.
func lossReason(err error, key string) string {
	if err == nil {
		return "no error given"
	}
	s := quotedKey.ReplaceAllStringFunc(err.Error(), func(q string) string {
		end := strings.LastIndex(q, `"`) + 1
		if k, uerr := strconv.Unquote(q[:end]); uerr == nil && k != "" && strings.HasPrefix(key, k) {
			return "KEY"
		}
		return q
	})
	s = strings.ReplaceAll(s, key, "KEY")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
