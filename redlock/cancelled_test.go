package redlock

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// A ctx that has already ended when a call begins: the call returns at
// once, says so, and sends nothing to any node.

// From a review: a TryLock whose ctx was already cancelled still sent its
// acquire (and then a cleanup) to the nodes, and printed a per-node error
// for each node it had stopped waiting for.
func TestCancelled_LockTryLockAndDoSendNothing(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	key := testenv.Key(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	calls := map[string]func() error{
		"TryLock": func() error { _, err := c.TryLock(ctx, key, time.Second); return err },
		"Lock":    func() error { _, err := c.Lock(ctx, key, time.Second); return err },
		"Do": func() error {
			return c.Do(ctx, key, time.Second, func(context.Context, *Lease) error { ran = true; return nil })
		},
	}
	for name, call := range calls {
		err := call()
		require.ErrorIs(t, err, ErrNotObtained, name)
		require.ErrorIs(t, err, context.Canceled, name)
		var e *NotObtainedError
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, ReasonCancelled, e.Reason, name)
		require.Empty(t, e.NodeErrors(), "%s: per-node errors for an attempt that was never made: %v", name, err)
	}
	require.False(t, ran, "Do ran fn without the lock")
	f.requireIdle(t)
	require.Zero(t, f.total(), "a call with a cancelled ctx reached the nodes")
	require.Empty(t, cl.values(t, cl.all(), key)[0])
	require.Equal(t, same("", len(cl.raw)), cl.values(t, cl.all(), key), "the key is on a node")
}

func TestCancelled_ExtendAndReleaseSendNothingAndKeepTheLease(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	key := testenv.Key(t)
	l, err := c.TryLock(context.Background(), key, 10*time.Second)
	require.NoError(t, err)
	// TryLock returns at a majority: the other nodes' acquires may not
	// have reached the hook yet, so wait for one on every node, not only
	// for the calls already started to end (failed a CI run).
	f.requireAttempts(t, 1)
	f.reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	err = l.Extend(ctx, 10*time.Second)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrNotHeld, "the lease is not lost, the extend was never sent")
	err = l.Release(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, ErrNotHeld)
	f.requireIdle(t)
	require.Zero(t, f.total(), "Extend or Release with a cancelled ctx reached the nodes")

	// Nothing was lost: the lease still holds the key, and a Release with
	// a live ctx gives it back.
	select {
	case <-l.Done():
		t.Fatal("a Release that sent nothing ended the lease")
	default:
	}
	for _, v := range cl.values(t, cl.all(), key) {
		require.NotEmpty(t, v, "the key is gone from a node")
	}
	require.NoError(t, l.Release(context.Background()))
	cl.requireGone(t, key, "after the second Release")
}

// A lease whose Release was not sent (its ctx had ended) and that the
// caller then drops does not keep its key forever: the key expires with
// its ttl on the nodes, and the lease's timer passes this Client's local
// line for the key on at its deadline, so the next Lock of the same
// Client gets it (docs/protocol.md, "A call whose ctx has already ended
// sends nothing").
func TestCancelled_ADroppedLeaseFreesTheKeyAtItsDeadline(t *testing.T) {
	const ttl = 500 * time.Millisecond
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	key := testenv.Key(t)
	l, err := c.Lock(context.Background(), key, ttl) // Lock, which holds the local gate
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, l.Release(ctx), context.Canceled)
	deadline := l.Deadline()
	// The caller drops l here, as after a failed deferred Release.

	lctx, lcancel := context.WithTimeout(context.Background(), 10*ttl)
	defer lcancel()
	next, err := c.Lock(lctx, key, ttl)
	require.NoError(t, err, "the dropped lease kept the key past its deadline")
	require.False(t, time.Now().Before(deadline), "the key was taken again before the dropped lease's deadline")
	require.NoError(t, next.Release(context.Background()))
}

// From a review: Inspect with a cancelled ctx returned a nil error and
// the verdict unknown, as if the nodes had not answered.
func TestCancelled_InspectReturnsTheCtxError(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	key := testenv.Key(t)
	// Inspect's reads are counted like any script call: with a live ctx
	// they reach every node (or this test would prove nothing).
	_, err := c.Inspect(context.Background(), key)
	require.NoError(t, err)
	f.requireIdle(t)
	require.Positive(t, f.total())
	f.reset()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ks, err := c.Inspect(ctx, key)
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, ks)
	f.requireIdle(t)
	require.Zero(t, f.total())
}

// Do returns fn's error alone when fn returned its ctx's cause, as its
// doc suggests: the same text must not be printed twice.
func TestDo_FnReturningItsCauseIsNotRepeated(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	key := testenv.Key(t)
	var cause error
	err := c.Do(context.Background(), key, 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
		cl.set(t, key, "thief", time.Minute, cl.all()...)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return cause
		case <-time.After(3 * time.Second):
			return errors.New("fn's ctx outlived the lease")
		}
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.Equal(t, cause, err, "Do joined fn's error to itself")
}

// A Do whose ctx ends while it waits for a held key returns the ctx's
// error from Lock, through the goroutine Lock ran on (aside), without
// running fn; that goroutine ends, and the wait leaves the key's line,
// so that the key goes to the next Lock once the holder releases it.
func TestDo_ACtxEndingWhileWaitingReturnsItsError(t *testing.T) {
	c, _ := newCluster(t, 5).ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	held, err := c.TryLock(ctx, key, 10*time.Second)
	require.NoError(t, err)

	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	ran := false
	start := time.Now()
	err = c.Do(wctx, key, 10*time.Second, func(context.Context, *Lease) error { ran = true; return nil })
	took := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Do's error once its ctx ended: %v", err)
	require.False(t, ran, "fn ran without the lease")
	require.GreaterOrEqual(t, took, 300*time.Millisecond, "Do returned before its ctx ended")
	require.Eventually(t, func() bool {
		buf := make([]byte, 1<<20)
		return !strings.Contains(string(buf[:runtime.Stack(buf, true)]), "redlock.aside[")
	}, 2*time.Second, 10*time.Millisecond, "the goroutine that ran Lock for Do is still there")

	require.NoError(t, held.Release(ctx))
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	defer lcancel()
	l, err := c.Lock(lctx, key, time.Second)
	require.NoError(t, err, "the key stayed reserved for the Do that gave up")
	require.NoError(t, l.Release(ctx))
}
