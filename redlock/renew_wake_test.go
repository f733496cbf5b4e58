package redlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Taking leases one after another does not make the renewer look at every
// lease once per lease taken: a lease whose first renewal comes after the
// loop's next look waits for that look. 300 leases of 30 s are kept
// renewed, each taken after the one before, and the loop may look at them
// only a few times (it looks once when it starts, and sleeps until the
// first lease is due, ten seconds away).
//
// Guards against: the loop being woken for every lease taken and every
// round that came back, each time for a pass over every lease kept: with
// 100,000 leases taken one after another, 100,000 passes over up to
// 100,000 leases, a fifth of the client's CPU in a renew-many run.
func TestRenew_TakingLeasesDoesNotWakeTheLoopForEach(t *testing.T) {
	c, _ := newCluster(t, 3).ready(t, WithMaxTTL(30*time.Second))
	ctx := context.Background()
	base := testenv.Key(t)
	const n = 300
	for i := range n {
		l, err := c.Lock(ctx, fmt.Sprintf("%s-%d", base, i), 30*time.Second)
		require.NoError(t, err)
		l.KeepRenewed()
	}
	c.renew.mu.Lock()
	passes := c.renew.passes
	c.renew.mu.Unlock()
	require.Less(t, passes, int64(10), "the renewer looked at its leases %d times while %d were taken", passes, n)
}

// A lease that falls due before the loop's next look wakes it: the loop
// sleeps ten seconds for a lease of 30 s, and a lease of 600 ms kept after
// it must be renewed within its own validity, not at the loop's next look.
func TestRenew_ALeaseDueBeforeTheLoopsNextLookWakesIt(t *testing.T) {
	c, _ := newCluster(t, 3).ready(t, WithMaxTTL(30*time.Second), roomy)
	ctx := context.Background()
	base := testenv.Key(t)
	long, err := c.Lock(ctx, base+"-long", 30*time.Second)
	require.NoError(t, err)
	long.KeepRenewed()
	require.Eventually(t, func() bool {
		c.renew.mu.Lock()
		defer c.renew.mu.Unlock()
		return !c.renew.wakeAt.IsZero() && time.Until(c.renew.wakeAt) > 5*time.Second
	}, 5*time.Second, time.Millisecond, "the loop never went to sleep for the long lease")

	short, err := c.Lock(ctx, base+"-short", 600*time.Millisecond)
	require.NoError(t, err)
	first := short.Deadline()
	short.KeepRenewed()
	require.Eventually(t, func() bool { return short.Deadline().After(first) }, 2*time.Second, 5*time.Millisecond,
		"the short lease was not renewed while the loop slept for the long one")
	select {
	case <-short.Done():
		t.Fatal("the short lease ended")
	default:
	}
}
