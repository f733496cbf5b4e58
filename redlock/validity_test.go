package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// frozenClock is a drift.Clock whose Now never moves: every duration the
// client measures on it is zero, so the deadlines it computes are exact
// sums that a test can compare to the nanosecond. Its timers are real.
type frozenClock struct{ now time.Time }

func (c frozenClock) Now() time.Time { return c.now }

func (c frozenClock) AfterFunc(d time.Duration, f func()) drift.Timer { return time.AfterFunc(d, f) }

// A lease is valid until its attempt's start plus ttl minus the drift
// (ttl*factor + 2ms), exactly: on a clock that does not move, Deadline is
// t0 + ttl - Drift(ttl, factor) to the nanosecond, for TryLock and Lock,
// with the default factor and another one.
//
// Guards against: newLease setting the deadline to t0 + ttl (the drift left
// out), a lease trusted for up to ttl*factor + 2ms after the nodes may
// have let the key go; a tolerance of tens of milliseconds (wider than the
// 32ms drift of a 3s ttl) cannot see it.
func TestValidity_LeaseDeadlineIsStartPlusTTLMinusDrift(t *testing.T) {
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
			rc := newRealCluster(t, 5) // each factor is another deployment
			c := rc.client(t, nil, nil, WithClock(frozenClock{now: t0}), WithDriftFactor(tc.factor), WithMaxTTL(tc.ttl))
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
