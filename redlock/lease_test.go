package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// A lease after the grant: its deadline, Extend, Release, expiry, and
// Do's renewal (docs/protocol.md, "Leases after the grant").

func TestLease_ExtendAndRelease(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 100*time.Millisecond)
	require.NoError(t, err)
	d0 := l.Deadline()
	require.NoError(t, l.Extend(ctx, time.Second))
	require.True(t, l.Deadline().After(d0.Add(500*time.Millisecond)), "deadline %v not moved from %v", l.Deadline(), d0)
	require.NoError(t, l.Release(ctx))
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed by Release")
	}
	require.ErrorIs(t, l.Release(ctx), ErrNotHeld)
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	cl.requireGone(t, key, "after Release")
}

func TestLease_ExtendNeverResurrects(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	const ttl = 100 * time.Millisecond
	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed at the end of validity")
	}
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	requireNotResurrected(t, cl, key, ttl)
}

// requireNotResurrected requires that no node holds key with more than
// ttl left (an Extend that brought it back would have set a longer one),
// then waits until the key has expired everywhere: the round that set it
// may have reached a node a little after the lease's deadline was counted.
func requireNotResurrected(t *testing.T, cl *cluster, key string, ttl time.Duration) {
	t.Helper()
	for i := range cl.raw {
		require.LessOrEqual(t, cl.pttl(t, i, key), ttl, "Extend brought the key back on node %d", i)
	}
	cl.requireGone(t, key, "the expired lease")
}

func TestLease_AnExtendAfterATakeoverEndsTheLease(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	f.requireAttempts(t, 1)
	cl.set(t, key, "thief", time.Minute, 0, 1, 2) // the lease is taken over on a majority
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after the lease was found lost")
	}
	require.Equal(t, []string{"thief", "thief", "thief"}, cl.values(t, []int{0, 1, 2}, key))
}

// With a majority unreachable, Extend and Release report the node errors,
// not ErrNotHeld, and Extend keeps the lease valid until its old deadline.
func TestLease_ExtendAndReleaseWithAMajorityDown(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	l, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	deadline := l.Deadline()
	boom := errors.New("connection refused")
	f.fail(boom, "", 0, 1, 2)
	err = l.Extend(ctx, time.Second)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrNotHeld)
	require.Equal(t, deadline, l.Deadline())
	select {
	case <-l.Done():
		t.Fatal("a failed Extend ended a lease that may still be held")
	default:
	}
	err = l.Release(ctx)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, ErrNotHeld)
	require.ErrorIs(t, err, ErrReleaseUnconfirmed)
	var re *ReleaseError
	require.ErrorAs(t, err, &re)
	// Three failures decide the release: the other two may not have been
	// heard from yet.
	require.Equal(t, 2, re.Confirmed+re.Unanswered)
	require.Equal(t, 0, re.Gone)
	require.Len(t, re.Errs, 3, "one *NodeError per failed node")
	require.ErrorContains(t, err, "of 5 nodes (3 needed); the rest expire with the ttl")
}

// A shorter Extend after a longer one leaves the longer expiry on the
// nodes (the script never shortens a key), so the lease keeps the later
// deadline too instead of reporting less than it holds.
func TestLease_ExtendNeverShortensTheDeadline(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMaxTTL(time.Minute))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Extend(ctx, 30*time.Second))
	long := l.Deadline()
	require.NoError(t, l.Extend(ctx, time.Second))
	require.Equal(t, long, l.Deadline(), "a shorter extend moved the deadline back")
	// What the lease promises must be held by a majority. (A node whose
	// acquire arrived after the extends holds only the first ttl: it was
	// not part of the majorities the deadline counts on.)
	var longer int
	for i := range 5 {
		if cl.pttl(t, i, key) > 20*time.Second {
			longer++
		}
	}
	require.GreaterOrEqual(t, longer, 3, "the majority lost the longer expiry")
}

// A lease is valid for ttl - drift from the START of the round that
// granted or extended it: counting from its end would overstate the
// validity by the round's duration, which is exactly what a slow node or
// a paused client stretches.
func TestLease_DeadlinesCountFromTheStartOfTheirRound(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprintf("fencing=%v", fenced), func(t *testing.T) {
			opts := []Option{WithNodeTimeout(2 * time.Second)}
			if fenced {
				opts = append(opts, WithFencing())
			}
			cl := newCluster(t, 5)
			c, f := cl.ready(t, opts...)
			const ttl, slow = 3 * time.Second, 150 * time.Millisecond
			f.delay(slow, "")
			ctx := context.Background()
			key := testenv.Key(t)
			margin := 50 * time.Millisecond // reading the clock around the call
			before := time.Now()
			l, err := c.TryLock(ctx, key, ttl)
			require.NoError(t, err)
			require.GreaterOrEqual(t, time.Since(before), slow, "the round was not slow")
			require.WithinDuration(t, before.Add(ttl-drift.Drift(ttl, factorOf(c))), l.Deadline(), margin,
				"the acquire deadline is not counted from the start of the round")

			before = time.Now()
			require.NoError(t, l.Extend(ctx, ttl))
			require.WithinDuration(t, before.Add(ttl-drift.Drift(ttl, factorOf(c))), l.Deadline(), margin,
				"the extend deadline is not counted from the start of its round")
		})
	}
}

// When the lease is lost (another owner took the key on every node, or an
// operator deleted it), fn's ctx is cancelled at the next renewal and Do
// returns ErrNotHeld (not ErrMaxHold) with fn's own error.
func TestDo_CancelsFnWhenTheLeaseIsLost(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	key := testenv.Key(t)
	var sawCancel bool
	err := c.Do(context.Background(), key, 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
		cl.set(t, key, "thief", time.Minute, cl.all()...)
		select {
		case <-ctx.Done():
			sawCancel = true
			return ctx.Err()
		case <-time.After(3 * time.Second):
			return errors.New("fn's ctx outlived the lease")
		}
	})
	require.True(t, sawCancel)
	require.ErrorIs(t, err, ErrNotHeld)
	require.NotErrorIs(t, err, ErrMaxHold)
	require.ErrorIs(t, err, context.Canceled)
	// The renewal's own error said "lease not held" already; Do's said it
	// again in front of it.
	require.Equal(t, 1, strings.Count(err.Error(), "lease not held"), "the message repeats itself: %v", err)
	require.Contains(t, err.Error(), "ended while fn was running")
}

// A lease that is over is never renewed again, even while its fn goes on
// running: the round that found it lost is its last. Its calls may reach
// the nodes that were not needed to judge it (at most 5 - 3) after fn's
// ctx ended, but no later round carries the key.
//
// Guards against: the renewer re-sending a lost lease every ttl/10 until
// fn returns (dozens of rounds here), which doubles the nodes' work when
// they are the reason leases are lost.
func TestDo_ALostLeaseIsNeverRenewedAgain(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithNodeTimeout(200*time.Millisecond))
	key := testenv.Key(t)
	var ended atomic.Bool
	var late atomic.Int64 // extend calls carrying key sent after fn's ctx ended
	f.before(func(_ context.Context, x *call) error {
		if x.Script == "extend" && slices.Contains(x.Keys, key) && ended.Load() {
			late.Add(1)
		}
		return nil
	})
	const ttl = 300 * time.Millisecond // renewed every 100 ms; retried every 30 ms
	err := c.Do(context.Background(), key, ttl, func(ctx context.Context, l *Lease) error {
		cl.set(t, key, "thief", time.Minute, cl.all()...)
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			return errors.New("fn's ctx outlived the lease")
		}
		ended.Store(true)
		// fn winds down slowly, as a real one may: more than 30 retry
		// periods of a lease that is over.
		time.Sleep(time.Second)
		return nil
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.LessOrEqual(t, late.Load(), int64(5-3),
		"%d extend calls of the lost lease after fn's ctx ended: it was renewed again", late.Load())
}

func TestDo_KeepsTheLeaseAlive(t *testing.T) {
	// Node timeouts with room for a loaded machine (the default, 5% of
	// the ttl, would be 12 ms); the section spans several renewals.
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(60*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	err := c.Do(ctx, key, 240*time.Millisecond, func(ctx context.Context, l *Lease) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("lease ended during a 900ms section with a 240ms ttl: %w", context.Cause(ctx))
		case <-time.After(900 * time.Millisecond):
		}
		return nil
	})
	require.NoError(t, err)
	cl.requireGone(t, key, "after Do")
}

func TestDo_StopsExtendingAfterMaxHold(t *testing.T) {
	// Generous node timeouts: extends must not fail on a loaded machine.
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMaxHold(600*time.Millisecond), WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	start := time.Now()
	err := c.Do(ctx, testenv.Key(t), 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
		<-ctx.Done()
		return nil
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.ErrorIs(t, err, ErrMaxHold)
	took := time.Since(start)
	require.Greater(t, took, 600*time.Millisecond, "extending stopped before the max hold")
	require.Less(t, took, 5*time.Second, "extending did not stop at the max hold")
}

// Do's renewals are batched: many leases on one Client cost each node a
// bounded number of extend calls per renewal period, not one per lease,
// and no lease is lost.
func TestDo_RenewsManyLeasesInBatches(t *testing.T) {
	cl := newCluster(t, 5)
	// Node timeouts and a ttl with room for a loaded machine under -race:
	// 200 leases and their renewals share two cores with whatever else
	// runs (a node timeout of 400 ms and a ttl of 1.2 s lost a lease to
	// three timed-out batches at a load of 8).
	c, f := cl.ready(t, WithNodeTimeout(time.Second))
	ctx := context.Background()
	const leases, ttl, hold = 200, 3 * time.Second, 6 * time.Second
	prefix := testenv.Key(t)
	held := make(chan struct{})
	var wg sync.WaitGroup
	var ready sync.WaitGroup
	ready.Add(leases)
	errs := make(chan error, leases)
	for i := range leases {
		wg.Go(func() {
			errs <- c.Do(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl, func(ctx context.Context, _ *Lease) error {
				ready.Done()
				select {
				case <-held:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
		})
	}
	ready.Wait()
	before := f.count("extend", -1)
	time.Sleep(hold)
	during := f.count("extend", -1) - before
	close(held)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "a lease was lost while its fn ran")
	}
	periods := float64(hold) / float64(ttl/3)
	perNodePerPeriod := float64(during) / 5 / periods
	t.Logf("%d extend calls on 5 nodes in %v for %d leases: %.1f per node per renewal period", during, hold, leases, perNodePerPeriod)
	require.Positive(t, during, "nothing was renewed")
	require.LessOrEqual(t, perNodePerPeriod, 6.0, "renewals are not batched")
}

// frozenClock is a Clock whose Now never moves: every duration the
// client measures on it is zero, so the deadlines it computes are exact
// sums that a test can compare to the nanosecond. Its timers are real.
type frozenClock struct{ now time.Time }

func (c frozenClock) Now() time.Time { return c.now }

func (c frozenClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func TestLease_ExtendExpiryAndReleaseOnTheNodes(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 500*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, key, l.Key())
	all := []int{0, 1, 2, 3, 4}
	// TryLock returns at a majority; the key sits under its exact name.
	held, holder := 0, -1
	var first string
	for i, v := range cl.values(t, all, key) {
		if v == "" {
			continue
		}
		if first == "" {
			first, holder = v, i
		}
		require.Equal(t, first, v, "node %d holds another value", i)
		held++
	}
	require.GreaterOrEqual(t, held, 3)
	// A migration-era client using plain SET NX on the same key is excluded.
	ok, err := cl.raw[holder].SetNX(ctx, key, "redsync-style", time.Second).Result()
	require.NoError(t, err)
	require.False(t, ok)

	require.NoError(t, l.Extend(ctx, 3*time.Second))
	extended := 0
	for _, rc := range cl.raw {
		if pttl, err := rc.PTTL(ctx, key).Result(); err == nil && pttl > 2*time.Second {
			extended++
		}
	}
	require.GreaterOrEqual(t, extended, 3, "Extend returned before a majority had the new ttl")

	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool {
		for _, v := range cl.values(t, all, key) {
			if v != "" {
				return false
			}
		}
		return true
	}, time.Second, 5*time.Millisecond)
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)

	// Expiry: Done closes, and Extend does not bring the key back.
	l, err = c.TryLock(ctx, key, 100*time.Millisecond)
	require.NoError(t, err)
	<-l.Done()
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)
	requireNotResurrected(t, cl, key, 100*time.Millisecond)
}

// From a review: two Extends of one lease whose replies come back in the other order
// than their effects: the nodes must never hold less than the lease
// promises.
func TestLease_ConcurrentExtendsNeverHoldLessThanPromised(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	var longRan atomic.Int32
	replyLong := make(chan struct{})
	// The node timeout is long enough for the slow replies to count.
	c, f := cl.ready(t, WithMaxTTL(20*time.Second), WithNodeTimeout(3*time.Second))
	f.after(func(c *call, err error) {
		// Only a call that ran counts (not a NOSCRIPT before the EVAL).
		if c.Script == "extend" && fmt.Sprint(c.Args[1]) == "10000" && err == nil {
			longRan.Add(1)
			<-replyLong // the extend ran on the node; its reply is slow
		}
	})
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)

	long := make(chan error, 1)
	go func() { long <- l.Extend(ctx, 10*time.Second) }()
	require.Eventually(t, func() bool { return longRan.Load() == 5 }, 2*time.Second, time.Millisecond)
	require.NoError(t, l.Extend(ctx, time.Second)) // lands last, replies first
	close(replyLong)
	require.NoError(t, <-long)

	promised := time.Until(l.Deadline())
	var covered int
	for i := range 5 {
		left := cl.raw[i].PTTL(ctx, key).Val()
		t.Logf("node %d holds the key for %v; the lease promises %v", i, left, promised)
		if left >= promised-50*time.Millisecond {
			covered++
		}
	}
	require.GreaterOrEqual(t, covered, 3, "the lease promises %v but a majority of nodes hold less", promised)
	time.Sleep(1200 * time.Millisecond)
	other := cl.client(t, WithMaxTTL(20*time.Second))
	l2, err := other.TryLock(ctx, key, time.Second)
	select {
	case <-l.Done():
		t.Fatal("the lease ended early")
	default:
	}
	require.ErrorIs(t, err, ErrNotObtained, "another client took the lock while the lease was open: %v", l2)
}

// A lease is valid until its attempt's start plus ttl minus the drift
// (ttl*factor + 2ms), exactly: on a clock that does not move, Deadline is
// t0 + ttl - Drift(ttl, factor) to the nanosecond, for TryLock and Lock,
// with the default factor and another one.
//
// Guards against: newLease setting the deadline to t0 + ttl (the drift left
// out), a lease trusted for up to ttl*factor + 2ms after the nodes may
// have let the key go; a tolerance of tens of milliseconds (wider than the
// 32ms drift of a 3s ttl) cannot see it.
func TestLease_DeadlineIsStartPlusTTLMinusDrift(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now()
	for _, tc := range []struct {
		name   string
		factor float64
		ttl    time.Duration
		want   time.Duration // ttl - drift, worked out by hand
	}{
		{"default factor", DefaultDriftFactor, 3 * time.Second, 3*time.Second - 32*time.Millisecond},
		{"factor 0.1", 0.1, 10 * time.Second, 10*time.Second - time.Second - 2*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.ttl-drift.Drift(tc.ttl, tc.factor))
			cl := newCluster(t, 5) // each factor is another deployment
			c := cl.client(t, WithClock(frozenClock{now: t0}), WithDriftFactor(tc.factor), WithMaxTTL(tc.ttl))
			require.NoError(t, c.Bootstrap(ctx))

			l, err := c.TryLock(ctx, testenv.Key(t), tc.ttl)
			require.NoError(t, err)
			require.Equal(t, t0.Add(tc.want), l.Deadline(), "TryLock's lease: deadline - t0 = %v, want ttl - drift = %v", l.Deadline().Sub(t0), tc.want)
			require.NoError(t, l.Release(ctx))

			l, err = c.Lock(ctx, testenv.Key(t), tc.ttl)
			require.NoError(t, err)
			require.Equal(t, t0.Add(tc.want), l.Deadline(), "Lock's lease: deadline - t0 = %v, want ttl - drift = %v", l.Deadline().Sub(t0), tc.want)
			require.NoError(t, l.Release(ctx))
			require.NoError(t, c.Close())
		})
	}
}

// From a review: a panic in Do's fn, recovered by the caller, must stop the renewal,
// release the lock and free this Client's line for the key.
func TestDo_APanicInFnReleases(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	c := cl.client(t)
	require.NoError(t, c.Bootstrap(ctx))
	key := testenv.Key(t)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		_ = c.Do(ctx, key, 10*time.Second, func(context.Context, *Lease) error { panic("boom") })
	}()
	// Release returns once a majority deleted the key; the calls to the
	// other nodes finish in the background (CI saw node 0 still holding it
	// right after Do). The ttl is 10 s, so only the release can empty them
	// within 2 s.
	for i := range 5 {
		require.Eventually(t, func() bool { return cl.value(t, i, key) == "" }, 2*time.Second, 10*time.Millisecond,
			"node %d still holds the key after the panic", i)
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	start := time.Now()
	l, err := c.Lock(lctx, key, time.Second)
	require.NoError(t, err, "the Client's line for the key stayed blocked")
	require.Less(t, time.Since(start), time.Second)
	require.NoError(t, l.Release(ctx))
}

// Two leases Do renews in one batch are judged each on its own part of the
// nodes' answers: when one is taken over on a majority, its fn's ctx ends
// with ErrNotHeld (the takeover, not the end of its validity) at the next
// renewal, while the other lease of the batch goes on being renewed and
// its fn keeps running.
//
// Guards against: the renewer applying one lease's result (the first of
// the batch) to every lease of it, which keeps renewing a lease taken over
// while another lease of its batch is held (or ends a held one with a
// lost one).
func TestRenew_BatchJudgesEachLeaseOnItsOwnResult(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const ttl = 1200 * time.Millisecond // renewed every 400ms
	keyA, keyB := testenv.Key(t)+"-a", testenv.Key(t)+"-b"
	batched := make(chan struct{}) // a renewal carrying both keys reached node 0
	var both atomic.Int64
	c, f := cl.ready(t, WithMaxTTL(ttl), WithNodeTimeout(300*time.Millisecond))
	f.after(func(c *call, err error) {
		if c.Node == 0 && c.Script == "extend" && len(c.Keys) == 4 && err == nil { // two lock keys, the marker and the server's identity
			both.Add(1)
			select {
			case batched <- struct{}{}:
			default:
			}
		}
	})

	type run struct {
		started chan *Lease
		ctx     chan context.Context
		stop    chan struct{}
		err     chan error
	}
	do := func(key string) *run {
		r := &run{started: make(chan *Lease, 1), ctx: make(chan context.Context, 1), stop: make(chan struct{}), err: make(chan error, 1)}
		go func() {
			r.err <- c.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
				r.ctx <- fctx
				r.started <- l
				select {
				case <-r.stop:
				case <-fctx.Done():
				}
				return nil
			})
		}()
		return r
	}
	a, b := do(keyA), do(keyB)
	var ctxA, ctxB context.Context
	var la *Lease
	for _, r := range []*run{a, b} {
		select {
		case l := <-r.started:
			if r == a {
				la, ctxA = l, <-r.ctx
			} else {
				ctxB = <-r.ctx
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Do did not start fn")
		}
	}
	var stopB sync.Once
	t.Cleanup(func() { stopB.Do(func() { close(b.stop) }); close(a.stop) })

	// Right after a renewal of both, another owner takes key A over on a
	// majority.
	select {
	case <-batched:
	case <-time.After(3 * ttl):
		t.Fatal("the two leases were never renewed in one batch")
	}
	for i := range 3 {
		require.NoError(t, cl.raw[i].Del(ctx, keyA).Err())
		require.NoError(t, cl.raw[i].Set(ctx, keyA, "another-owner", time.Minute).Err())
	}
	took := time.Now()
	// No renewal that started before the takeover can make A valid past
	// this; only one that counted it as held after the takeover can.
	deadline := took.Add(ttl - drift.Drift(ttl, DefaultDriftFactor))

	// A's fn learns it at the next renewal (within about 400ms), well
	// before its validity ends.
	select {
	case <-ctxA.Done():
	case <-time.After(time.Until(deadline)):
		t.Fatalf("fn of the taken-over lease still running %v after the takeover (deadline %v after it)", time.Since(took), la.Deadline().Sub(took))
	}
	require.ErrorIs(t, context.Cause(ctxA), ErrNotHeld)
	require.Contains(t, context.Cause(ctxA).Error(), "no longer holds our value", "A ended by its validity, not by the takeover: %v", context.Cause(ctxA))
	require.True(t, time.Now().Before(deadline))
	errA := <-a.err
	require.ErrorIs(t, errA, ErrNotHeld)

	// B keeps running through more than a ttl of renewals.
	renewals := both.Load()
	select {
	case <-ctxB.Done():
		t.Fatalf("fn of the held lease ended: %v", context.Cause(ctxB))
	case <-time.After(ttl + ttl/2):
	}
	require.Equal(t, "another-owner", cl.value(t, 0, keyA))
	require.NotEmpty(t, cl.value(t, 0, keyB))
	stopB.Do(func() { close(b.stop) })
	require.NoError(t, <-b.err)
	require.Positive(t, renewals)
}

// A node runs the extend script for a whole call at once, in time that
// grows with the leases it carries. Here a node takes 30 ms per lease (a
// hook stands in for a slow script): 50 leases due together would take
// 1.5 s, past the 1 s node timeout, on every node. Sent in chunks of 10
// (300 ms each), every lease is renewed and no call runs out of time.
// The leases are taken first and handed to the renewer at once, as Do
// does for each, so that all of them fall due in one batch.
//
// Guards against: one call per node for every lease due, judged by one
// node timeout whatever its size, which fails every lease at once and
// resends them all, as a Client holding 10,000 leases did on a busy host.
func TestRenew_ManyLeasesDueTogetherAreSentInChunks(t *testing.T) {
	renewInChunks(t)
}

// The same with two of the five nodes frozen once the leases are held:
// each chunk is judged by the three that answer, and every lease is
// renewed and stays valid.
func TestRenew_ChunksRenewOnAMajorityWhileTwoNodesAreFrozen(t *testing.T) {
	renewInChunks(t, 3, 4)
}

// renewInChunks is TestRenew_ManyLeasesDueTogetherAreSentInChunks with
// the nodes frozen after the leases are taken; their calls' errors are
// expected.
func renewInChunks(t *testing.T, frozen ...int) {
	cl := newCluster(t, 5)
	const leases, chunk, perLease = 50, 10, 30 * time.Millisecond
	const ttl = 6 * time.Second // renewed every 2 s
	c, f := cl.ready(t, WithNodeTimeout(time.Second))
	c.renew.chunk = chunk
	ls := takeLeases(t, c, leases, ttl)
	var mu sync.Mutex
	renewed := map[string]bool{} // keys a call to node 0 renewed
	var largest int              // the most leases one extend call carried
	var failed []error           // extend calls that failed
	f.before(func(ctx context.Context, x *call) error {
		if x.Script != "extend" {
			return nil
		}
		n := len(x.Keys) - 2 // the lock keys, then the marker and the server's identity
		mu.Lock()
		largest = max(largest, n)
		mu.Unlock()
		select {
		case <-time.After(time.Duration(n) * perLease):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	f.after(func(x *call, err error) {
		if x.Script != "extend" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if slices.Contains(frozen, x.Node) {
			return
		}
		if err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") { // the script is sent again in full
			failed = append(failed, err)
			return
		}
		if x.Node == 0 {
			for _, k := range x.Keys[:len(x.Keys)-2] {
				renewed[k] = true
			}
		}
	})
	cl.freeze(t, frozen...)
	granted := renewAll(t, c, ls, ttl) // each lease's deadline before its renewal
	// One renewal of every lease: a round that failed would retry, and
	// show in failed. Node 0 answering is not the end of a round: the
	// deadlines move once a majority did (a stress run checked them in
	// between), so the wait is for both.
	moved := func() int {
		n := 0
		for i, l := range ls {
			if l.Deadline().After(granted[i]) {
				n++
			}
		}
		return n
	}
	renewedAll := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(failed) > 0 || len(renewed) == leases && moved() == leases
	}
	if !assert.Eventually(t, renewedAll, 30*time.Second, 10*time.Millisecond) {
		mu.Lock()
		n := len(renewed)
		mu.Unlock()
		t.Fatalf("in 30 s, %d of %d leases renewed on node 0, %d on a majority (their deadline moved)", n, leases, moved())
	}
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, failed, "extend calls failed (the largest carried %d leases)", largest)
	require.LessOrEqual(t, largest, chunk, "an extend call carried more leases than a chunk")
	for _, l := range ls {
		require.False(t, l.over(), "a renewed lease is over")
	}
}

// Leases of different ttls renewed in one batch each keep their own
// deadline: while a 600 ms lease and a 3 s lease are renewed together,
// the short one never trusts itself more than its ttl ahead, and the long
// one is never cut to the short one's ttl.
//
// Guards against: the renewer judging a whole batch by one lease's ttl
// (the first one's, say). With the long lease first the short one trusts
// itself about 2.4 s past what its keys promise; with the short one first
// the long one's fn is about to lose its lease at every batch.
func TestRenew_EachLeaseOfABatchKeepsItsOwnTTL(t *testing.T) {
	cl := newCluster(t, 5)
	const short, long = 600 * time.Millisecond, 3 * time.Second
	keyS, keyL := testenv.Key(t)+"-short", testenv.Key(t)+"-long"
	var batches atomic.Int64 // renewals carrying both keys, applied on node 0
	c, f := cl.ready(t, WithMaxTTL(long), WithNodeTimeout(300*time.Millisecond))
	f.after(func(x *call, err error) {
		if x.Node == 0 && x.Script == "extend" && err == nil && slices.Contains(x.Keys, keyS) && slices.Contains(x.Keys, keyL) {
			batches.Add(1)
		}
	})
	stop := make(chan struct{})
	leases := make(chan *Lease, 2)
	errs := make(chan error, 2)
	for _, k := range []struct {
		key string
		ttl time.Duration
	}{{keyS, short}, {keyL, long}} {
		go func() {
			errs <- c.Do(context.Background(), k.key, k.ttl, func(ctx context.Context, l *Lease) error {
				leases <- l
				select {
				case <-stop:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			})
		}()
	}
	var ls, ll *Lease
	for range 2 {
		select {
		case l := <-leases:
			if l.Key() == keyS {
				ls = l
			} else {
				ll = l
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Do did not start fn")
		}
	}
	// Sample both deadlines until five batches carrying both leases were
	// applied (one about every second): a lease's deadline is at most its
	// ttl after the round's start, so never more than ttl ahead of now.
	// The samples run one at a time, in Eventually's goroutine; what they
	// found is read once Eventually returned.
	var firstBatch time.Time
	var broken error
	var mu sync.Mutex
	sample := func() bool {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if ahead := ls.Deadline().Sub(now); ahead > short {
			broken = fmt.Errorf("the %v lease trusts itself %v ahead, past its ttl", short, ahead)
			return true
		}
		// After the first batch the long lease must keep well over the
		// short ttl: a renewal every second, and a failed one retried
		// after 300 ms, leave it more than 1.5 s of a 3 s ttl.
		if firstBatch.IsZero() && batches.Load() > 0 {
			firstBatch = now
		}
		if !firstBatch.IsZero() {
			if ahead := ll.Deadline().Sub(now); ahead < short {
				broken = fmt.Errorf("the %v lease has only %v left after a renewal in a batch with the %v lease", long, ahead, short)
				return true
			}
		}
		return batches.Load() >= 5
	}
	sampled := assert.Eventually(t, sample, 20*time.Second, 2*time.Millisecond)
	mu.Lock()
	err := broken
	mu.Unlock()
	require.NoError(t, err)
	require.True(t, sampled, "only %d renewals carried both leases in 20 s", batches.Load())
	close(stop)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
}

// Do renews a lease for ttl counted from the start of the renewal round,
// as Extend does: after a renewal whose calls each took 200ms, the
// lease's Deadline is at most the round's start + ttl - drift.
//
// Guards against: the renewal's deadline being counted from the end of
// the round (t0 + elapsed, or a later t0 passed by the renewer), which
// trusts the lease for as long as the round took after the nodes may
// have let it go.
func TestRenew_DeadlineCountsFromTheRoundStart(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const ttl = 1500 * time.Millisecond // renewed every 500ms
	const slow = 200 * time.Millisecond
	key := testenv.Key(t)
	var mu sync.Mutex
	var first time.Time // when the first renewal's first call was sent
	c, f := cl.ready(t, WithMaxTTL(ttl), WithNodeTimeout(time.Second))
	f.before(func(ctx context.Context, c *call) error {
		if c.Script != "extend" || c.Keys[0] != key {
			return nil
		}
		mu.Lock()
		if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
		select {
		case <-time.After(slow):
		case <-ctx.Done():
		}
		return nil
	})

	err := c.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
		initial := l.Deadline()
		for l.Deadline().Equal(initial) {
			select {
			case <-fctx.Done():
				return context.Cause(fctx)
			case <-time.After(5 * time.Millisecond):
			}
		}
		mu.Lock()
		start := first
		mu.Unlock()
		got, limit := l.Deadline(), start.Add(ttl-drift.Drift(ttl, DefaultDriftFactor))
		if got.After(limit) {
			return errors.New("deadline " + got.Sub(start).String() + " after the renewal round's start; at most ttl - drift = " +
				(ttl - drift.Drift(ttl, DefaultDriftFactor)).String())
		}
		if !got.After(start.Add(ttl - drift.Drift(ttl, DefaultDriftFactor) - slow)) {
			return errors.New("deadline " + got.Sub(start).String() + " after the renewal round's start: not from this renewal")
		}
		return nil
	})
	require.NoError(t, err)
}

// From a red-team review: a lease handed over inside a release counts
// from before the call's first attempt, so a call that waited most of its
// ttl gets a lease with little validity left. Do used to schedule its
// first renewal one ttl/3 after it got the lease, whatever the lease's
// deadline: here the lease had about 0.56 s left and the first renewal
// was due 1 s later, so fn's ctx ended and Do returned ErrNotHeld while
// every node still held the key. The renewer must renew by the remaining
// validity.
func TestDo_RenewsAHandedLeaseBeforeItsValidityRunsOut(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	h := cl.client(t, WithKeyHandOff())
	w := cl.client(t, slowRetry, WithKeyHandOff())
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	const ttl = 3 * time.Second
	lh, err := h.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	settled(t, h, 2*time.Second) // the key is on every node before w tries

	start := time.Now()
	handed := make(chan *Lease, 1)
	done := make(chan error, 1)
	go func() {
		done <- w.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
			handed <- l
			// Hold well past the handed lease's first deadline.
			select {
			case <-fctx.Done():
				return context.Cause(fctx)
			case <-time.After(1500 * time.Millisecond):
				return nil
			}
		})
	}()
	cl.requireLineLen(t, key, 1, "the waiter never joined the line")
	time.Sleep(time.Until(start.Add(2400 * time.Millisecond)))
	require.NoError(t, lh.Release(ctx))

	var l *Lease
	select {
	case l = <-handed:
	case err := <-done:
		t.Fatalf("Do returned before fn ran: %v", err)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter never got the key")
	}
	require.True(t, handedTo(valueOf(l)), "the waiter took the key with an attempt, not by hand-off")
	left := time.Until(l.Deadline())
	t.Logf("the handed lease had %v of validity left", left)
	require.Less(t, left, ttl/3, "the scenario needs a handed lease with less than ttl/3 left")

	select {
	case err := <-done:
		require.NoError(t, err, "Do lost a healthy handed lease")
	case <-time.After(5 * time.Second):
		t.Fatal("Do did not return")
	}
}

// From a review: a failed extend was logged with the round's joined error
// as one attribute, its lines run together. The summary is "err" and each
// node's error an attribute of the group "nodes".
func TestDo_LogsAFailedExtendWithOneAttributePerNode(t *testing.T) {
	cl := newCluster(t, 5)
	var log logs
	c, f := cl.ready(t, WithLogger(log.logger()), WithNodeTimeout(100*time.Millisecond))
	err := c.Do(context.Background(), testenv.Key(t), time.Second, func(ctx context.Context, l *Lease) error {
		f.fail(errors.New("injected extend failure"), "extend", 0, 1, 2)
		defer f.heal()
		for len(log.at(slog.LevelWarn, "extend failed")) == 0 {
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(10 * time.Millisecond):
			}
		}
		return nil
	})
	require.NoError(t, err)
	recs := log.at(slog.LevelWarn, "extend failed")
	require.NotEmpty(t, recs)
	a := recordAttrs(recs[0])
	require.Contains(t, a, "err")
	require.NotContains(t, a["err"].String(), "\n", "per-node errors joined into the summary")
	require.Contains(t, a["err"].String(), "3 needed")
	require.Contains(t, a, "nodes")
	nodes := map[string]string{}
	for _, n := range a["nodes"].Group() {
		nodes[n.Key] = n.Value.String()
	}
	for _, i := range []string{"0", "1", "2"} {
		require.Contains(t, nodes[i], "injected extend failure", "node %s: %v", i, nodes)
	}
}

// KeepRenewed keeps leases taken with TryLock renewed in the Client's
// batches, with no goroutine per lease; a lease that is lost ends (Done),
// is never sent again, and the renewer forgets it, as it forgets the
// released ones.
func TestLease_KeepRenewedRenewsInBatchesWithNoGoroutinePerLease(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	const n, ttl = 40, 300 * time.Millisecond // renewed every 100 ms
	leases := make([]*Lease, n)
	for i := range leases {
		l, err := c.TryLock(ctx, fmt.Sprintf("%s:%d", key, i), ttl)
		require.NoError(t, err)
		leases[i] = l
	}
	lost := leases[0].Key()
	var gone atomic.Bool
	var late atomic.Int64 // extend calls carrying the lost lease's key after it ended
	f.before(func(_ context.Context, x *call) error {
		if x.Script == "extend" && slices.Contains(x.Keys, lost) && gone.Load() {
			late.Add(1)
		}
		return nil
	})
	before := runtime.NumGoroutine()
	first := make([]time.Time, n)
	for i, l := range leases {
		first[i] = l.Deadline()
		l.KeepRenewed()
		l.KeepRenewed() // a second call changes nothing
	}
	require.LessOrEqual(t, runtime.NumGoroutine()-before, 3, "goroutines started for %d leases", n)
	// Every lease outlives its first deadline by a renewal period at least.
	require.Eventually(t, func() bool {
		for i, l := range leases {
			if !l.Deadline().After(first[i].Add(ttl)) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the leases were not renewed past their first deadline")
	for i, l := range leases {
		select {
		case <-l.Done():
			t.Fatalf("lease %d ended while kept", i)
		default:
		}
	}
	require.Less(t, f.count("extend", 0), int64(n), "the leases were renewed one call each, not in batches")

	// Taken over on every node: the next renewal finds it lost.
	cl.set(t, lost, "thief", time.Minute, cl.all()...)
	select {
	case <-leases[0].Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a lease taken over on every node did not end")
	}
	gone.Store(true)
	// Three more renewals of the others, none carrying the lost one.
	mark := leases[1].Deadline()
	require.Eventually(t, func() bool { return leases[1].Deadline().After(mark.Add(2 * ttl / 3)) }, 5*time.Second, 5*time.Millisecond)
	// The round that found it lost may still have its last calls to go
	// (it decided at a majority): at most 5-3 of them.
	require.LessOrEqual(t, late.Load(), int64(5-3), "extend calls of the lost lease after it ended: it was renewed again")
	require.ErrorIs(t, leases[0].Release(ctx), ErrNotHeld)
	for _, l := range leases[1:] {
		require.NoError(t, l.Release(ctx))
	}
	require.Eventually(t, func() bool {
		c.renew.mu.Lock()
		defer c.renew.mu.Unlock()
		return len(c.renew.kept) == 0
	}, 5*time.Second, 5*time.Millisecond, "the renewer still keeps leases that ended")
}

// A lease held under Do, alone on its deployment, outlives three rolling
// restarts that each empty another node: a renewal that meets the
// restarted node starts its admission, and once it is admitted the next
// renewal puts the key back there (docs/protocol.md, "Extends re-create
// what a restart lost"). Without it each restart takes one node's copy
// for good, and the third loses the lease: the first restarted node never
// holds the key again.
func TestDo_ALeaseSurvivesThreeRollingEmptyRestarts(t *testing.T) {
	cl := newCluster(t, 5)
	const maxTTL = time.Second
	c, _ := cl.ready(t, WithMaxTTL(maxTTL), WithNodeTimeout(200*time.Millisecond))
	key := testenv.Key(t)
	v, end := holdUnderDo(t, c, key, maxTTL)
	for _, i := range []int{0, 1, 2} {
		cl.restartEmpty(t, i)
		// Nothing else runs on the deployment: the renewals alone start
		// the node's quarantine, and its admission follows.
		require.Eventually(t, func() bool { return cl.admittedOn(t, i) },
			6*maxTTL, 20*time.Millisecond, "node %d not admitted again", i)
		require.Eventually(t, func() bool { return cl.value(t, i, key) == v },
			3*maxTTL, 10*time.Millisecond, "node %d never got the lease's key back after its restart", i)
	}
	require.Equal(t, []string{v, v, v, v, v}, cl.values(t, cl.all(), key))
	require.NoError(t, end(), "the lease was lost across the restarts")
}

// An extend round decided after the lease's deadline does not make the
// lease valid again, although every node renewed it: the holder stopped
// trusting it in between, and since an extend may re-create a key a node
// lost, another holder may have been granted and gone meanwhile
// (docs/protocol.md, "Extends re-create what a restart lost"). Without
// the rule the deadline moved forward here.
func TestExtend_ARoundDecidedAfterTheDeadlineDoesNotReviveTheLease(t *testing.T) {
	cl := newCluster(t, 5)
	// The deadline's timer runs late, as it does when the process was
	// paused through the deadline and the round's replies are handled
	// before the timer's goroutine gets to run.
	c, f := cl.ready(t, WithNodeTimeout(time.Second), WithClock(lateTimers{}))
	ctx := context.Background()
	key := testenv.Key(t)
	const ttl = 800 * time.Millisecond
	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	deadline := l.Deadline()
	// Every node renews at once; its reply reaches the client only after
	// the deadline.
	f.after(func(x *call, err error) {
		if x.Script == "extend" && err == nil { // not a NOSCRIPT before the script is loaded
			time.Sleep(time.Until(deadline) + 50*time.Millisecond)
		}
	})
	// The round starts shortly before the deadline, so that its own
	// validity (ttl - elapsed - drift) is far from spent when it ends.
	time.Sleep(time.Until(deadline) - 150*time.Millisecond)
	err = l.Extend(ctx, ttl)
	require.ErrorIs(t, err, ErrNotHeld)
	require.Equal(t, deadline, l.Deadline(), "the lease was made valid again after its deadline")
	select {
	case <-l.Done():
	default:
		t.Fatal("Done is open after the lease lapsed and its extend was refused")
	}
}

// lateTimers is the system clock with timers that fire an hour late.
type lateTimers struct{}

func (lateTimers) Now() time.Time { return time.Now() }

func (lateTimers) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d+time.Hour, f)
}

// A node frozen past a lease's ttl keeps its data but not the lease's key,
// which expired there while its renewals could not reach it. Once it
// answers again, the lease's next renewal puts the key back: it did not
// renew there last round, the node is admitted with our settings and has
// no tombstone of the value (docs/protocol.md, "Extends re-create what a
// restart lost"). Without re-creation the node never held the key again,
// and the lease stood on four nodes.
func TestDo_ANodeFrozenPastTheTTLGetsTheKeyBack(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(200*time.Millisecond))
	key := testenv.Key(t)
	const ttl = time.Second
	v, end := holdUnderDo(t, c, key, ttl)
	require.Eventually(t, func() bool { return cl.value(t, 0, key) == v }, ttl, 5*time.Millisecond)
	cl.freeze(t, 0)
	// The fault itself: longer than the key's ttl, so that it expires on
	// node 0 while renewals cannot reach it.
	time.Sleep(ttl + ttl/2)
	cl.thaw(t, 0)
	require.Eventually(t, func() bool { return cl.value(t, 0, key) == v },
		2*ttl, 10*time.Millisecond, "node 0 never got the lease's key back after it answered again")
	require.NoError(t, end(), "the lease was lost")
}

// holdUnderDo holds key under c.Do until end is called, and returns the
// lease's value once fn runs. end lets fn return and gives Do's error: an
// error if fn's ctx ended first (the lease was lost). If the test ends
// before end, fn is let go in cleanup.
func holdUnderDo(t *testing.T, c *Client, key string, ttl time.Duration) (value string, end func() error) {
	t.Helper()
	held := make(chan string, 1)
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- c.Do(context.Background(), key, ttl, func(ctx context.Context, l *Lease) error {
			held <- valueOf(l)
			select {
			case <-ctx.Done():
				return fmt.Errorf("fn's ctx ended: %w", context.Cause(ctx))
			case <-stop:
				return nil
			}
		})
	}()
	select {
	case value = <-held:
	case err := <-errc:
		t.Fatalf("Do: %v", err)
	}
	var once sync.Once
	end = func() error {
		once.Do(func() { close(stop) })
		return <-errc
	}
	t.Cleanup(func() { once.Do(func() { close(stop) }) })
	return value, end
}
