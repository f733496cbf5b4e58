package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Do with WaitAtMost(0) on a held key makes one attempt and returns
// ErrNotObtained without running fn: the cron job that skips its run.
// (From the newcomer review: "try once" was a Client-wide WithRetry.)
func TestDo_WaitAtMostZeroOnAHeldKeyReturnsAtOnce(t *testing.T) {
	cl := newCluster(t, 5)
	a := cl.client(t)
	c, f := cl.ready(t)
	key, _ := heldKey(t, a)
	ctx := context.Background()
	for _, try := range []func(fn func(context.Context, *Lease) error) error{
		func(fn func(context.Context, *Lease) error) error {
			return c.Do(ctx, key, time.Second, fn, WaitAtMost(0))
		},
		func(fn func(context.Context, *Lease) error) error { return c.TryDo(ctx, key, time.Second, fn) },
	} {
		f.reset()
		ran := false
		err := try(func(context.Context, *Lease) error { ran = true; return nil })
		require.ErrorIs(t, err, ErrNotObtained)
		var e *NotObtainedError
		require.ErrorAs(t, err, &e)
		require.Equal(t, ReasonHeld, e.Reason, e.Detail)
		require.False(t, ran, "fn ran without the lock")
		requireCalls(t, f, "acquire", 5, "not one attempt: one acquire call per node")
	}
	// Nor did the try join the key's line: nobody waits there.
	cl.requireLineLen(t, key, 0, "a try-once call joined the line")
}

// The wait bound bounds the acquisition only: fn runs past it, to its
// end, with a ctx that is not done. (The review saw "fn stopped after
// 501ms" when the wait was bounded with ctx.)
func TestDo_TheWaitBoundDoesNotCutFnShort(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	key := testenv.Key(t)
	ctx := context.Background()
	const work = 2 * time.Second
	err := c.Do(ctx, key, time.Second, func(fctx context.Context, l *Lease) error {
		select {
		case <-fctx.Done():
			return context.Cause(fctx)
		case <-time.After(work):
		}
		return nil
	}, WaitAtMost(500*time.Millisecond))
	require.NoError(t, err, "fn was stopped before its work was done")
}

// A Lock whose WaitAtMost bound passes returns the last attempt's error:
// ErrNotObtained with why (held), not the caller's ctx error, and the
// key's holder keeps it.
func TestLock_WaitAtMostGivesUpWithTheLastAttemptsError(t *testing.T) {
	cl := newCluster(t, 5)
	a := cl.client(t)
	c := cl.client(t)
	key, la := heldKey(t, a)
	ctx := context.Background()
	start := time.Now()
	_, err := c.Lock(ctx, key, time.Second, WaitAtMost(300*time.Millisecond))
	took := time.Since(start)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "the bound is not the caller's deadline")
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonHeld, e.Reason, e.Detail)
	require.Contains(t, e.Detail, "WaitAtMost")
	// The holder's key has 5 s left: a Lock that gave up this early did
	// so because of its bound.
	require.Less(t, took, 3*time.Second)
	require.NoError(t, la.Release(ctx))
}

// One Client serves, at the same time, a call that waits for one key and
// calls that do not wait for others: each call's options are its own.
func TestClient_ServesAWaitingAndANonWaitingCallAtOnce(t *testing.T) {
	cl := newCluster(t, 5)
	a := cl.client(t)
	c, _ := cl.ready(t)
	ctx := context.Background()
	waitKey, la := heldKey(t, a)
	busyKey := testenv.Key(t) + ":busy"
	lb, err := a.TryLock(ctx, busyKey, 5*time.Second)
	require.NoError(t, err)
	settled(t, a, 2*time.Second)

	var waited atomic.Bool
	got := make(chan error, 1)
	go func() {
		err := c.Do(ctx, waitKey, time.Second, func(context.Context, *Lease) error {
			waited.Store(true)
			return nil
		})
		got <- err
	}()
	cl.requireLineLen(t, waitKey, 1, "the waiting call never joined the line")

	// Meanwhile the same Client tries another held key once, and a free
	// one, without waiting and without disturbing the waiting call.
	ran := false
	err = c.TryDo(ctx, busyKey, time.Second, func(context.Context, *Lease) error { ran = true; return nil })
	require.ErrorIs(t, err, ErrNotObtained)
	require.False(t, ran)
	free := testenv.Key(t) + ":free"
	require.NoError(t, c.Do(ctx, free, time.Second, func(context.Context, *Lease) error { ran = true; return nil }, WaitAtMost(0)))
	require.True(t, ran)
	require.False(t, waited.Load(), "the waiting call got a held key")
	cl.requireLineLen(t, waitKey, 1, "the other calls disturbed the waiting call's place")

	require.NoError(t, la.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		require.True(t, waited.Load())
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting call did not get the key after its release")
	}
	require.NoError(t, lb.Release(ctx))
}

// A per-call retry policy replaces the Client's for that call alone.
func TestLock_CallRetryOverridesTheClients(t *testing.T) {
	cl := newCluster(t, 5)
	a := cl.client(t)
	c, f := cl.ready(t) // default policy: unlimited attempts
	key, la := heldKey(t, a)
	ctx := context.Background()
	f.reset()
	_, err := c.Lock(ctx, key, time.Second, WithCallRetry(func(int) time.Duration { return time.Millisecond }, 3))
	require.ErrorIs(t, err, ErrNotObtained)
	requireCalls(t, f, "acquire", 3*5, "not three attempts")
	require.NoError(t, la.Release(ctx))
}

// Invalid call options, and oversized metadata, are errors that touch no
// node, for every call that takes them.
func TestLock_BadCallOptionsTouchNoNode(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	nop := func(context.Context, *Lease) error { return nil }
	tests := []struct {
		name string
		opt  CallOption
		want string
	}{
		{"negative wait", WaitAtMost(-time.Second), "WaitAtMost"},
		{"nil retry", WithCallRetry(nil, 1), "nil delay"},
		{"negative attempts", WithCallRetry(DefaultRetry, -1), "maxAttempts"},
		{"nil option", nil, "nil CallOption"},
		{"metadata over the bound", WithMetadata(strings.Repeat("x", MaxMetadata+1)), "metadata longer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.reset()
			_, err := c.TryLock(ctx, key, time.Second, tc.opt)
			require.ErrorContains(t, err, tc.want)
			_, err = c.Lock(ctx, key, time.Second, tc.opt)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, c.Do(ctx, key, time.Second, nop, tc.opt), tc.want)
			require.ErrorContains(t, c.TryDo(ctx, key, time.Second, nop, tc.opt), tc.want)
			require.Zero(t, f.total(), "bad input reached a node")
		})
	}
	_, err := c.TryLock(ctx, key, time.Second, WithMetadata(strings.Repeat("x", MaxMetadata+1)))
	require.True(t, errors.Is(err, ErrMetadataTooLarge), "oversized metadata: %v", err)
	// TryLock makes one attempt: a wait bound or retry policy for it is a
	// mistake, said before any node is touched.
	_, err = c.TryLock(ctx, key, time.Second, WaitAtMost(time.Second))
	require.ErrorContains(t, err, "one attempt")
	require.ErrorContains(t, c.TryDo(ctx, key, time.Second, nop, WithCallRetry(DefaultRetry, 3)), "one attempt")
	require.Zero(t, f.total())
}

// requireCalls checks that f counts n calls of script on all nodes once
// the calls still on their way arrived (a round returns at its decision)
// and every call sent returned: a call too many of the Lock call, which
// returned before, would be among them.
func requireCalls(t *testing.T, f *faults, script string, n int64, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return f.count(script, -1) >= n }, 2*time.Second, time.Millisecond, what)
	f.requireIdle(t)
	require.Equal(t, n, f.count(script, -1), what)
}

// One Client serves fenced and unfenced keys: Fenced gives a call's lease
// a token, and tokens of fenced calls keep growing across unfenced
// holders of the same key in between.
func TestLock_FencedPerCall(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)

	plain, err := c.TryLock(ctx, key+":plain", time.Second)
	require.NoError(t, err)
	require.Zero(t, plain.FencingToken())
	require.NoError(t, plain.Release(ctx))

	f.reset()
	l1, err := c.Lock(ctx, key, time.Second, Fenced())
	require.NoError(t, err)
	require.Positive(t, l1.FencingToken())
	require.Positive(t, f.count("commit", -1), "no fencing commit round")
	require.NoError(t, l1.Release(ctx))
	mid, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	require.Zero(t, mid.FencingToken())
	require.NoError(t, mid.Release(ctx))
	l2, err := c.TryLock(ctx, key, time.Second, Fenced())
	require.NoError(t, err)
	require.Greater(t, l2.FencingToken(), l1.FencingToken())
	require.NoError(t, l2.Release(ctx))
}

// A fenced call of a Client built WithKeyHandOff is never handed the key
// by a release (a handed key has no commit round, so no token): it takes
// the key with an attempt of its own and gets a token.
func TestHandOff_AFencedCallIsNotHandedTheKey(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	a := cl.client(t)
	b := cl.client(t, slowRetry, WithKeyHandOff())
	key, la := heldKey(t, a)

	lb := lockIn(t, b, key, 2*time.Second, Fenced())
	cl.requireLineLen(t, key, 1, "b never joined the line")
	id := cl.line(t, 0, key)[0]
	require.False(t, takesHandOffs(id), "a fenced call's waiter id offers to take hand-offs: %q", id)
	l := releaseTo(t, la, lb)
	require.False(t, handedTo(valueOf(l)), "the fenced call was handed the key: %q", valueOf(l))
	require.Positive(t, l.FencingToken(), "the fenced call's lease has no token")
	require.NoError(t, l.Release(ctx))
}

// The wait bound also ends a wait behind another Lock of the same Client
// (the local line), with ReasonLocal, and leaves the holder's lease alone.
func TestLock_WaitAtMostBoundsTheWaitBehindALocalCall(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	settled(t, c, 2*time.Second) // the round's last calls, sent after its decision
	f.reset()
	_, err = c.Lock(ctx, key, time.Second, WaitAtMost(200*time.Millisecond))
	require.ErrorIs(t, err, ErrNotObtained)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonLocal, e.Reason, e.Detail)
	require.Contains(t, e.Detail, "WaitAtMost")
	require.Zero(t, f.count("acquire", -1), "the call behind the local holder sent an attempt")
	require.NoError(t, l.Release(ctx))
}

// The wait bound does not cut an attempt under way: one that is still
// waiting for its nodes when the bound passes runs to its end, and its
// lease is returned.
func TestLock_WaitAtMostLetsTheAttemptUnderWayFinish(t *testing.T) {
	const ttl = 5 * time.Second
	cl := newCluster(t, 5)
	// A node timeout far above the 100 ms delay below: with the harness's
	// 300 ms, every node missed it once under load (race detector, four
	// busy loops), and the test is about the bound, not the timeout.
	c, f := cl.ready(t, WithNodeTimeout(2*time.Second))
	ctx := context.Background()
	key := testenv.Key(t)
	f.delay(100*time.Millisecond, "acquire")
	start := time.Now()
	l, err := c.Lock(ctx, key, ttl, WaitAtMost(30*time.Millisecond))
	took := time.Since(start)
	require.NoError(t, err, "the bound cut the attempt under way")
	require.GreaterOrEqual(t, took, 100*time.Millisecond, "the attempt ended before the bound passed: the test proves nothing")
	f.heal()
	require.NoError(t, l.Release(ctx))
}

// A Lock that gave up at its bound leaves nothing behind: no attempt
// after it returned (the last one's calls to the nodes it did not wait
// for may still go out; they carry its value), and no place in the key's
// line on any node (a release would otherwise keep the key for a call
// that is gone).
func TestLock_WaitAtMostLeavesNothingBehind(t *testing.T) {
	cl := newCluster(t, 5)
	a := cl.client(t)
	c, f := cl.ready(t)
	key, la := heldKey(t, a)
	ctx := context.Background()
	var mu sync.Mutex
	var returned bool
	before := map[string]bool{} // the attempts' values sent before Lock returned
	var late []string           // values first sent after it returned
	f.before(func(_ context.Context, call *call) error {
		if call.Script != "acquire" || call.Keys[0] != key {
			return nil
		}
		v := fmt.Sprint(call.Args[0])
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !returned:
			before[v] = true
		case !before[v]:
			late = append(late, v)
		}
		return nil
	})
	_, err := c.Lock(ctx, key, time.Second, WaitAtMost(300*time.Millisecond),
		WithCallRetry(func(int) time.Duration { return 20 * time.Millisecond }, 0))
	mu.Lock()
	returned = true
	attempts := len(before)
	mu.Unlock()
	require.ErrorIs(t, err, ErrNotObtained)
	require.Greater(t, attempts, 1, "one attempt only: the test proves nothing about later ones")
	cl.requireLineLen(t, key, 0, "the call that gave up is still in the key's line")
	// The call left its gate and its wait for notices, and every script
	// call the Client sent returned: nothing of it is left to try again.
	require.Eventually(t, func() bool { return gateRefs(c, key) == 0 && waitersOf(c, key) == 0 },
		2*time.Second, time.Millisecond, "the call that gave up still waits in the Client")
	f.requireIdle(t)
	mu.Lock()
	require.Empty(t, late, "attempts went out after Lock returned")
	mu.Unlock()
	require.NoError(t, la.Release(ctx))
}
