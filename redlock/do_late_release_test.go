package redlock

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// A Do whose fn returned within the lease's validity returns fn's result
// when its release lands only after the validity ended: the keys found
// gone then may simply have expired, and nothing says another holder had
// the key while fn ran. The release calls reach the nodes 300 ms after
// the deadline (inside the cleanup timeout, so they are answered), when
// the keys have expired on every node.
//
// Guards against: Do reporting ErrNotHeld, "lost", for work done while
// the lease was held, as it did for thousands of leases at once when
// 100,000 Do calls released together on a busy host and their releases
// came after their validity (results/2026-12-07-release-after-fn.md); a
// caller that retries on ErrNotHeld would do that work twice.
func TestDo_AReleaseLandingAfterTheValidityIsNoLoss(t *testing.T) {
	var log logs
	cl := newCluster(t, 5)
	const ttl = time.Second
	c, f := cl.ready(t, WithLogger(log.logger()))
	ctx := context.Background()
	// The release script is cached on the nodes first: a NOSCRIPT, late
	// too, would send it again past the cleanup timeout.
	warm, err := c.Lock(ctx, testenv.Key(t)+"-warm", ttl)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	key := testenv.Key(t)
	err = c.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
		f.delay(time.Until(l.Deadline())+300*time.Millisecond, "release")
		return nil
	})
	f.heal()
	require.NoError(t, err, "fn returned within the validity; the release only came late")
	warned := warnings(&log, "redlock: Do's lease ran out after fn returned, before its release")
	require.Len(t, warned, 1, "the late release is logged")
	require.Equal(t, keyText(key), warned[0]["key"].String())
	cl.requireGone(t, key, "the key expired")
}

// The same when Release itself starts after the deadline (the goroutine
// that runs Do is not scheduled for a while after fn returns, as when
// thousands of Do calls end at once): Release finds the lease expired.
func TestDo_AReleaseStartingAfterTheValidityIsNoLoss(t *testing.T) {
	const ttl = time.Second
	stall := &sleepOnStart{name: "quorumlock.Release", d: ttl + 200*time.Millisecond}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(stall))
	var log logs
	c, _ := newCluster(t, 5).ready(t, WithTracerProvider(tp), WithLogger(log.logger()))
	key := testenv.Key(t)
	var deadline time.Time
	err := c.Do(context.Background(), key, ttl, func(_ context.Context, l *Lease) error {
		deadline = l.Deadline()
		stall.on.Store(true)
		return nil
	})
	require.True(t, time.Now().After(deadline), "Release was not held up past the deadline")
	require.NoError(t, err, "fn returned within the validity; the release only started late")
	require.Len(t, warnings(&log, "redlock: Do's lease ran out after fn returned, before its release"), 1)

	// DoAll, the same.
	stall.on.Store(false)
	err = c.DoAll(context.Background(), []string{key + "-a", key + "-b"}, ttl, func(_ context.Context, s *LeaseSet) error {
		stall.on.Store(true)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, warnings(&log, "redlock: DoAll's leases ran out after fn returned, before their release"), 1)
}

// A lease shown lost is still reported lost: fn returns at once after the
// key was deleted on every node, and the release, sent within the
// validity, finds it gone there.
//
// Guards against: the rule above hiding a loss the release saw in time,
// for Do and for a DoAll set (which must pass its leases to the check).
func TestDo_AReleaseThatFindsTheKeyGoneInTimeReportsTheLoss(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	key := testenv.Key(t)
	err := c.Do(context.Background(), key, 10*time.Second, func(context.Context, *Lease) error {
		cl.drop(t, key, cl.all()...)
		return nil
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.Contains(t, err.Error(), "no longer held our value on")
	require.NotContains(t, err.Error(), "after its validity")
	require.False(t, errors.Is(err, context.DeadlineExceeded))

	// DoAll, with one key of its set gone: the set is reported lost.
	keys := []string{key + "-a", key + "-b"}
	err = c.DoAll(context.Background(), keys, 10*time.Second, func(context.Context, *LeaseSet) error {
		cl.drop(t, keys[1], cl.all()...)
		return nil
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.Contains(t, err.Error(), "no longer held our value on")
}

// warnings returns the attributes of the Warn records with message msg.
func warnings(l *logs, msg string) []map[string]slog.Value {
	var out []map[string]slog.Value
	for _, r := range l.at(slog.LevelWarn, msg) {
		if r.Message == msg {
			out = append(out, recordAttrs(r))
		}
	}
	return out
}

// sleepOnStart is a span processor that, while on, sleeps for d when a
// span of the given name starts, once: a stand-in for a goroutine that is
// not scheduled for that long.
type sleepOnStart struct {
	name string
	d    time.Duration
	on   atomic.Bool
}

func (p *sleepOnStart) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() == p.name && p.on.CompareAndSwap(true, false) {
		time.Sleep(p.d)
	}
}
func (*sleepOnStart) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*sleepOnStart) Shutdown(context.Context) error   { return nil }
func (*sleepOnStart) ForceFlush(context.Context) error { return nil }
