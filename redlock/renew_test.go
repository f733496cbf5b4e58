package redlock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

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
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const ttl = 1200 * time.Millisecond // renewed every 400ms
	keyA, keyB := testenv.Key(t)+"-a", testenv.Key(t)+"-b"
	batched := make(chan struct{}) // a renewal carrying both keys reached node 0
	var both atomic.Int64
	watch := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 0 {
			return sc
		}
		return hookScripter{Scripter: sc, after: func(_ context.Context, script string, keys []string, _ []any, cmd *redis.Cmd) {
			if script == "extend" && len(keys) == 2 && cmd.Err() == nil {
				both.Add(1)
				select {
				case batched <- struct{}{}:
				default:
				}
			}
		}}
	}
	c := rc.client(t, watch, nil, WithMaxTTL(ttl), WithNodeTimeout(300*time.Millisecond))
	require.NoError(t, c.Bootstrap(ctx))

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
		require.NoError(t, rc.raw[i].Del(ctx, keyA).Err())
		require.NoError(t, rc.raw[i].Set(ctx, keyA, "another-owner", time.Minute).Err())
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
	require.Equal(t, "another-owner", rc.value(t, 0, keyA))
	require.NotEmpty(t, rc.value(t, 0, keyB))
	stopB.Do(func() { close(b.stop) })
	require.NoError(t, <-b.err)
	require.Positive(t, renewals)
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
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const ttl = 1500 * time.Millisecond // renewed every 500ms
	const slow = 200 * time.Millisecond
	key := testenv.Key(t)
	var mu sync.Mutex
	var first time.Time // when the first renewal's first call was sent
	delay := func(_ int, sc redis.Scripter) redis.Scripter {
		return hookScripter{Scripter: sc, before: func(ctx context.Context, script string, keys []string, _ []any) *redis.Cmd {
			if script != "extend" || keys[0] != key {
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
		}}
	}
	c := rc.client(t, delay, nil, WithMaxTTL(ttl), WithNodeTimeout(time.Second))
	require.NoError(t, c.Bootstrap(ctx))

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
	nodes := testenv.RedisNodes(t, 5)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	h := wakeClient(t, ucs, WithKeyHandOff())
	w := wakeClient(t, ucs, slowRetry, WithKeyHandOff())
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	const ttl = 3 * time.Second
	lh, err := h.TryLock(ctx, key, ttl)
	require.NoError(t, err)

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
	requireLineLen(t, ucs, key, 1, "the waiter never joined the line")
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
	require.True(t, strings.Contains(l.value, "~"), "the waiter took the key with an attempt, not by hand-off")
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
