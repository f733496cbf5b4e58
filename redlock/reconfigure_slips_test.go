package redlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Reconfigure interrupted, rerun, mistyped or stale: each test is a way an
// operator's change went wrong, and requires that no lease of the new
// settings is granted while one of the old settings is trusted, and that a
// run which cannot finish says so instead of returning nil.

// stopAtHold is a command's faults that end its ctx at the first hold-off
// it sends (between its steps 1 and 2): cancel is the ctx's.
func stopAtHold(cl *cluster, cancel context.CancelFunc) *faults {
	f := newFaults(cl)
	f.before(func(ctx context.Context, c *call) error {
		if c.Script == "reconfigure" && len(c.Args) > 0 && c.Args[0] == "hold" {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	return f
}

// stoppedWithALease deploys oldIdx with a max ttl of 1 s, takes a lease of
// those settings on a new key, and runs a change to newIdx with a max ttl
// of 300 ms that stops between its steps (on first, whose node clients
// end its ctx at the first hold-off).
func stoppedWithALease(t *testing.T, cl *cluster, oldIdx, newIdx []int) (string, *Lease, *Client) {
	t.Helper()
	ctx := context.Background()
	oldOpts := []Option{WithMaxTTL(time.Second)}
	oldc := cl.deployed(t, newFaults(cl), oldIdx, oldOpts...)
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	first := cl.over(t, stopAtHold(cl, cancel), newIdx, WithMaxTTL(300*time.Millisecond))
	err = first.Reconfigure(cctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	return key, l1, first
}

// untilDeadline has c try key every 5 ms until deadline has passed and
// reports a lease granted before it (nil: none was).
func untilDeadline(t *testing.T, c *Client, key string, ttl time.Duration, deadline time.Time) *Lease {
	t.Helper()
	var early, late *Lease // a lease of a try started before the deadline, or after it
	tried := assert.Eventually(t, func() bool {
		if !time.Now().Before(deadline.Add(50 * time.Millisecond)) {
			return true
		}
		start := time.Now()
		l, err := c.TryLock(context.Background(), key, ttl)
		switch {
		case err != nil:
			return false
		case start.Before(deadline):
			early = l
		default:
			late = l
		}
		return true
	}, time.Until(deadline)+5*time.Second, 5*time.Millisecond, "the tries did not end")
	require.True(t, tried)
	if late != nil {
		require.NoError(t, late.Release(context.Background()))
	}
	return early
}

// A change to a node list disjoint from the old one, stopped between its
// steps (or whose hold-offs are slow to land): the old nodes refuse the old
// settings, and a client of the new settings started as the command allows
// must not find the new nodes bare and admit them as a brand-new
// deployment while the old lease is trusted.
func TestReconfigure_AStopBeforeTheHoldOffLeavesNoNewNodeBare(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 6)
	oldIdx, newIdx := []int{0, 1, 2}, []int{3, 4, 5}
	key, l1, first := stoppedWithALease(t, cl, oldIdx, newIdx)

	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond), roomy)
	if l2 := untilDeadline(t, newc, key, 300*time.Millisecond, l1.Deadline()); l2 != nil {
		t.Fatalf("double grant: a lease of the new settings %v before the old lease's deadline", l1.Deadline().Sub(l2.Deadline().Add(-300*time.Millisecond)))
	}
	// Running the command again finishes the change.
	require.NoError(t, first.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), WithMaxTTL(time.Second)))
	l2, _ := lockAfter(t, newc, key, 300*time.Millisecond, 3*time.Second)
	require.NoError(t, l2.Release(ctx))
}

// After a stop between the steps the old nodes no longer carry the old
// settings: a rerun typed with a wrong old max ttl must be refused, not
// size its hold-off from the wrong settings and let a client of the new
// settings lock while the old lease lives.
func TestReconfigure_ARerunWithOtherOldSettingsIsRefused(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 3, 4}
	oldOpts := []Option{WithMaxTTL(time.Second)}
	key, l1, _ := stoppedWithALease(t, cl, oldIdx, newIdx)

	// The slip: --from-max-ttl 200ms instead of 1s.
	cmd := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond))
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), WithMaxTTL(200*time.Millisecond))
	require.Error(t, err, "a rerun with other old settings was taken")
	require.ErrorContains(t, err, "maxttl=1000ms", "the error does not say which change is under way")

	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond), roomy)
	if l2 := untilDeadline(t, newc, key, 300*time.Millisecond, l1.Deadline()); l2 != nil {
		t.Fatalf("double grant: a lease of the new settings before the old lease's deadline %v", l1.Deadline())
	}
	// The rerun with the right old settings finishes it.
	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...))
	l2, _ := lockAfter(t, newc, key, 300*time.Millisecond, 3*time.Second)
	require.NoError(t, l2.Release(ctx))
}

// After S -> T finished from {0,1,2} to {0,1,3}, a stale S -> T run for the
// list {0,1,2} must not be taken for a rerun: node 2, retired, would be
// held off and admitted with T, and two node lists would run under one set
// of settings, each granting on a majority of its own.
func TestReconfigure_AStaleRunWithAnotherNodeListIsRefused(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 4)
	oldOpts := []Option{WithMaxTTL(400 * time.Millisecond)}
	cl.deployed(t, newFaults(cl), []int{0, 1, 2}, oldOpts...)
	cmd := cl.over(t, newFaults(cl), []int{0, 1, 3}, WithMaxTTL(300*time.Millisecond))
	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...))
	require.Equal(t, []string{script.Retired(cmd.dep.marker)}, cl.markers(t, 2))

	stale := cl.over(t, newFaults(cl), []int{0, 1, 2}, WithMaxTTL(300*time.Millisecond))
	err := stale.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...)
	require.Error(t, err, "a stale run with another node list was taken for a rerun")
	require.Equal(t, []string{script.Retired(cmd.dep.marker)}, cl.markers(t, 2), "the stale run wrote to the retired node")

	// The two lists' clients: x does not reach node 1 and locks on 0 and
	// 3; y, over the stale list, must not lock on 1 and 2.
	fx := newFaults(cl)
	fx.fail(errors.New("unreachable"), "", 1)
	x := cl.over(t, fx, []int{0, 1, 3}, WithMaxTTL(300*time.Millisecond), roomy)
	y := cl.over(t, newFaults(cl), []int{0, 1, 2}, WithMaxTTL(300*time.Millisecond), roomy)
	key := testenv.Key(t)
	lx, err := x.TryLock(ctx, key, 300*time.Millisecond)
	require.NoError(t, err)
	if ly := untilDeadline(t, y, key, 300*time.Millisecond, lx.Deadline()); ly != nil {
		t.Fatalf("double grant: two node lists run under %s", cmd.dep.marker)
	}
}

// After a stop between the steps, a rerun typed with the new settings as
// the old ones must not return nil ("nothing to change"): the nodes carry
// "reconfiguring to T" with no hold-off, and no client of T would ever
// lock. It says which change is under way; the right rerun finishes it.
func TestReconfigure_ARerunWithTheNewSettingsAsOldSaysWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldOpts := []Option{WithMaxTTL(400 * time.Millisecond)}
	cl.deployed(t, newFaults(cl), idx, oldOpts...)
	cctx, cancel := context.WithCancel(ctx)
	first := cl.over(t, stopAtHold(cl, cancel), idx, WithMaxTTL(300*time.Millisecond))
	err := first.Reconfigure(cctx, cl.hooked(t, newFaults(cl), idx), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))

	err = cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), WithMaxTTL(300*time.Millisecond))
	require.Error(t, err, "a rerun with old = new returned nil while the change is not done")
	require.ErrorContains(t, err, "maxttl=400ms", "the error does not say which change is under way")

	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), oldOpts...))
	newc := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond), roomy)
	requireLocks(t, newc, 300*time.Millisecond)
}

// A new node that does not answer the first look: the change is named by
// its new nodes, so nothing is written and the old clients go on.
func TestReconfigure_ANewNodeDownWritesNothing(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 4)
	oldOpts := []Option{WithMaxTTL(400 * time.Millisecond), roomy}
	oldc := cl.deployed(t, newFaults(cl), []int{0, 1, 2}, oldOpts...)
	fcmd := newFaults(cl)
	fcmd.fail(errors.New("connection refused"), "", 3)
	cmd := cl.over(t, fcmd, []int{0, 1, 3}, WithMaxTTL(300*time.Millisecond))
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	require.ErrorContains(t, err, "1 of 3 new nodes did not answer")
	require.ErrorContains(t, err, "nothing was written")
	require.Equal(t, same(oldc.dep.marker, 3), cl.markers(t, 0, 1, 2))
	require.Equal(t, []string{""}, cl.markers(t, 3))
	requireLocks(t, oldc, 400*time.Millisecond)
}

// Step 1 reaches the old nodes but too few new ones: the command stops
// before any hold-off and does not say that the new clients may start,
// and the new nodes it did not mark stay bare for the rerun to mark.
func TestReconfigure_Step1ShortOfTheNewNodesStopsBeforeTheHoldOff(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 6)
	oldOpts := []Option{WithMaxTTL(400 * time.Millisecond)}
	cl.deployed(t, newFaults(cl), []int{0, 1, 2}, oldOpts...)
	fcmd := newFaults(cl)
	fcmd.fail(errors.New("connection reset by peer"), "reconfigure", 4, 5)
	log := &testenv.Buffer{}
	cmd := cl.over(t, fcmd, []int{3, 4, 5}, WithMaxTTL(300*time.Millisecond),
		WithLogger(slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelInfo}))))
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	require.ErrorContains(t, err, "1 of 3 new ones (2 must)")
	require.ErrorContains(t, err, "do not start clients of the new settings yet")
	require.NotContains(t, log.String(), "step=marked", "the command said the new clients may start")
	moving := script.Moving(cmd.dep.marker)
	require.Equal(t, []string{moving, "", ""}, cl.markers(t, 3, 4, 5))
	for _, i := range []int{3, 4, 5} {
		_, err := cl.raw[i].HGet(ctx, keyPending, "reconfigure").Result()
		require.ErrorIs(t, err, redis.Nil, "node %d: a hold-off was stamped", i)
	}
	// The rerun marks the rest and finishes the change.
	fcmd.heal()
	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...))
	require.Equal(t, same(cmd.dep.marker, 3), cl.markers(t, 3, 4, 5))
}
