package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// "Held" and "the lock service is down" are told apart: a job skips on
// the first and alerts on the second (IsHeld, IsUnavailable).

// heldByAnother returns a fresh key that another owner holds on every node
// for a minute.
func heldByAnother(t *testing.T, cl *cluster) string {
	t.Helper()
	key := testenv.Key(t)
	cl.set(t, key, "other", time.Minute, cl.all()...)
	return key
}

// A key held by another owner on the nodes that answer, with three of
// five nodes down, is no quorum, not held: nobody could have taken the
// lock. The holder's nodes answer first (go-redis retries a refused dial
// for longer than the node timeout), so the round saw the key held before
// it was decided; it called that ReasonHeld, and quorumlock run exited 75
// (skip) for an outage.
func TestUnavailable_AKeyHeldWhereFewerThanAMajorityAnswerIsNoQuorum(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := heldByAnother(t, cl)
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.nodes[i].Kill())
	}

	_, err := c.TryLock(ctx, key, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonNoQuorum, e.Reason, e.Detail)
	require.True(t, IsUnavailable(err), "not unavailable: %v", err)
	require.False(t, IsHeld(err), "called held with three of five nodes down: %v", err)
	require.Contains(t, e.Detail, "3 of 5 nodes unreachable (connection refused)")
	require.Contains(t, e.Detail, "held by another owner on")
}

// One node failing of five and the key held on the rest is held: a
// majority answered. The failing node (full: it answers OOM at once) and
// two of the holder's nodes answer first and decide the round (it cannot
// win), with fewer than a majority heard; the attempt hears the others out
// until a majority answered before it says which it is. Without that, it called a held key an
// outage.
func TestUnavailable_OneNodeFailingAndTheKeyHeldIsHeld(t *testing.T) {
	const ttl = 5 * time.Second // node timeout 250 ms: the delay below fits
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	settleProofs(t, c)
	ctx := context.Background()
	key := heldByAnother(t, cl)
	require.NoError(t, cl.raw[4].ConfigSet(ctx, "maxmemory", "1").Err())
	t.Cleanup(func() { _ = cl.raw[4].ConfigSet(ctx, "maxmemory", "0").Err() })
	f.delay(60*time.Millisecond, "acquire", 2, 3)

	_, err := c.TryLock(ctx, key, ttl)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonHeld, e.Reason, "%v", err)
	require.True(t, IsHeld(err), "not held: %v", err)
	require.False(t, IsUnavailable(err), "called unavailable with four of five nodes up: %v", err)
	require.Contains(t, e.Detail, "held elsewhere: by another owner on")
	require.GreaterOrEqual(t, e.Replied, 4, "the attempt did not hear a majority answer: %v", err)
	require.Contains(t, err.Error(), "OOM", "the failing node's reply is kept")
}

// Nodes that do not answer at all (frozen) count as unreachable once the
// node timeout passed, and the message says so.
func TestUnavailable_FrozenNodesAreNamedAsNotAnsweringInTime(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := heldByAnother(t, cl)
	cl.freeze(t, 2, 3, 4)

	_, err := c.TryLock(ctx, key, 2*time.Second)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonNoQuorum, e.Reason, e.Detail)
	require.True(t, IsUnavailable(err))
	require.Contains(t, e.Detail, "3 of 5 nodes unreachable (no reply in time)")
}

// What each reason is, to IsHeld and IsUnavailable; neither takes an
// error that is not a *NotObtainedError, wrapped or not.
func TestUnavailable_EachReasonIsHeldUnavailableOrNeither(t *testing.T) {
	for _, tc := range []struct {
		reason            Reason
		held, unavailable bool
	}{
		{ReasonHeld, true, false},
		{ReasonLocal, true, false},
		{ReasonNoQuorum, false, true},
		{ReasonQuarantine, false, true},
		{ReasonValidity, false, true},
		{ReasonFenceCommit, false, true},
		{ReasonCancelled, false, false},
		{ReasonRefused, false, false},
	} {
		err := fmtWrap(&NotObtainedError{Key: "k", Reason: tc.reason})
		require.Equal(t, tc.held, IsHeld(err), "IsHeld(%s)", tc.reason)
		require.Equal(t, tc.unavailable, IsUnavailable(err), "IsUnavailable(%s)", tc.reason)
	}
	for _, err := range []error{nil, ErrNotObtained, ErrNotHeld, context.Canceled} {
		require.False(t, IsHeld(err), "IsHeld(%v)", err)
		require.False(t, IsUnavailable(err), "IsUnavailable(%v)", err)
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("do"), err) }

// While the lock service cannot grant (here two of three nodes frozen),
// a waiting Lock backs off: every attempt is a call to each node that
// cannot succeed, and a host or network too busy to answer in time must
// not get them every 20-100 ms from every waiting client (waiter.backoff).
// Over 3 s the default policy alone makes at least 30 attempts (one per
// 100 ms at most); backing off from 100 ms to 1 s makes about 8.
func TestUnavailable_LockBacksOffWhileNoMajorityAnswers(t *testing.T) {
	cl := newCluster(t, 3)
	c, f := cl.ready(t)
	cl.freeze(t, 1, 2)
	t.Cleanup(func() { cl.thaw(t, 1, 2) })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.Lock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "no quorum")
	attempts := f.count("acquire", 0)
	t.Logf("%d attempts in 3 s", attempts)
	require.GreaterOrEqual(t, attempts, int64(3))
	require.LessOrEqual(t, attempts, int64(15), "Lock kept trying at its retry policy's pace while no majority answered")
}

// A waiting Lock says once that it waits for the lock service, not for a
// holder: WithUnavailableNotice is called once per episode, however many
// attempts fail, and again after the service granted in between.
func TestUnavailable_AWaitingLockSaysOncePerEpisodeThatItWaitsForTheService(t *testing.T) {
	cl := newCluster(t, 3)
	var mu sync.Mutex
	var notices []error
	var log logs
	c, _ := cl.ready(t, WithLogger(log.logger()), WithUnavailableNotice(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, err)
	}))
	said := func() []error {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(notices)
	}
	wait := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		_, err := c.Lock(ctx, testenv.Key(t), time.Second)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}

	cl.freeze(t, 1, 2)
	wait()
	got := said()
	require.Len(t, got, 1, "one notice for the whole wait")
	require.True(t, IsUnavailable(got[0]), "%v", got[0])
	require.ErrorContains(t, got[0], "no quorum")
	wait()
	require.Len(t, said(), 1, "a second wait in the same episode said it again")
	require.Len(t, log.at(slog.LevelWarn, "the lock service cannot grant the lock now"), 1, "the episode's Warn, once")

	cl.thaw(t, 1, 2)
	l, err := c.Lock(context.Background(), testenv.Key(t), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	cl.freeze(t, 1, 2)
	t.Cleanup(func() { cl.thaw(t, 1, 2) })
	wait()
	require.Len(t, said(), 2, "a new episode after a grant went unsaid")
}

// Backing off never carries a waiting Lock past the moment the nodes said
// their refusal ends: after five attempts refused for want of answers, an
// attempt refused only by a quarantine that ends in 80 ms waits those
// 80 ms, not the back-off's 0.5 to 1 s (it did, before the bound). With
// no such moment, or one further off than the back-off, the back-off
// stands.
func TestUnavailable_BackingOffStopsAtTheEndOfTheQuarantine(t *testing.T) {
	cl := newCluster(t, 3)
	c := cl.client(t)
	cc := callConfig{retry: DefaultRetry}
	refused := func(reason Reason, wait time.Duration, errs ...error) outcome {
		return outcome{err: &NotObtainedError{Key: "k", Reason: reason, Needed: 2, Nodes: 3, Errs: errs}, wait: wait}
	}
	quarantined := &NodeError{Node: 0, Err: ErrNodeQuarantined}
	down := &NodeError{Node: 1, Err: context.DeadlineExceeded}

	w := c.newWaiter("k", time.Second, &cc)
	w.down = 5
	w.last = refused(ReasonQuarantine, 80*time.Millisecond, quarantined, &NodeError{Node: 1, Err: ErrNodeQuarantined})
	require.Equal(t, 80*time.Millisecond, w.nextDelay(50*time.Millisecond))

	w = c.newWaiter("k", time.Second, &cc)
	w.down = 5
	w.last = refused(ReasonNoQuorum, 0, down)
	require.GreaterOrEqual(t, w.nextDelay(50*time.Millisecond), 500*time.Millisecond, "no back-off without a moment to wait for")

	w = c.newWaiter("k", time.Second, &cc)
	w.down = 5
	w.last = refused(ReasonQuarantine, 5*time.Second, quarantined, down)
	got := w.nextDelay(50 * time.Millisecond)
	require.GreaterOrEqual(t, got, 500*time.Millisecond, "a far quarantine end shortened the back-off")
	require.Less(t, got, 5*time.Second)

	// Contention is not backed off, and resets the count.
	w.last = refused(ReasonHeld, 0)
	require.Equal(t, 50*time.Millisecond, w.nextDelay(50*time.Millisecond))
	require.Zero(t, w.down)
}
