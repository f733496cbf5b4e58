package redlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestMetrics_CountOutcomes(t *testing.T) {
	reader, mp := meters(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMeterProvider(mp))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, l.Extend(ctx, time.Second))
	cl.set(t, key, "thief", time.Minute, cl.all()...)
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					outcome, _ := dp.Attributes.Value(outcomeKey)
					if sums[m.Name] == nil {
						sums[m.Name] = map[string]int64{}
					}
					sums[m.Name][outcome.AsString()] += dp.Value
				}
			}
		}
	}
	require.Equal(t, int64(1), sums["quorumlock.acquisitions"]["obtained"], "acquisitions: %v", sums)
	require.Equal(t, int64(1), sums["quorumlock.acquisitions"]["held"], "acquisitions: %v", sums)
	require.Equal(t, int64(1), sums["quorumlock.extends"]["ok"], "extends: %v", sums)
	require.Equal(t, int64(1), sums["quorumlock.extends"]["lost"], "extends: %v", sums)
	require.Equal(t, int64(1), sums["quorumlock.leases.lost"][""], "lost: %v", sums)
	require.Zero(t, sums["quorumlock.node.errors"][""], "no node failed: %v", sums)
}

// meters is a MeterProvider whose metrics a test reads with collect.
func meters(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp
}

// collect reads every metric once, by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// gauge is the value of an int64 gauge (0 when absent).
func gauge(t *testing.T, ms map[string]metricdata.Metrics, name string) int64 {
	t.Helper()
	g, ok := ms[name].Data.(metricdata.Gauge[int64])
	require.True(t, ok, "%s is an int64 gauge", name)
	require.Len(t, g.DataPoints, 1, name)
	return g.DataPoints[0].Value
}

// histCounts counts a histogram's measurements by the value of attribute k.
func histCounts(t *testing.T, ms map[string]metricdata.Metrics, name string, k attribute.Key) map[string]uint64 {
	t.Helper()
	h, ok := ms[name].Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram", name)
	out := map[string]uint64{}
	for _, dp := range h.DataPoints {
		v, _ := dp.Attributes.Value(k)
		out[v.AsString()] += dp.Count
	}
	return out
}

func TestMetrics_GaugesLeasesHeldAndNodesInQuarantine(t *testing.T) {
	reader, mp := meters(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMeterProvider(mp))
	ctx := context.Background()
	l1, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	l2, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	ms := collect(t, reader)
	require.Equal(t, int64(2), gauge(t, ms, "quorumlock.leases.held"))
	require.Zero(t, gauge(t, ms, "quorumlock.nodes.quarantined"))

	require.NoError(t, l1.Release(ctx))
	// A lost lease stops counting too.
	cl.set(t, l2.Key(), "thief", time.Minute, cl.all()...)
	require.ErrorIs(t, l2.Extend(ctx, time.Second), ErrNotHeld)
	require.Zero(t, gauge(t, collect(t, reader), "quorumlock.leases.held"))

	// Two nodes lose their data: attempts find them out of the vote (the
	// deployment's max ttl is a minute, so they stay out). An attempt that
	// returned at a quorum may not have heard from both yet: the gauge is
	// what the client last saw.
	cl.wipe(t, 1)
	cl.wipe(t, 3)
	var seen int64
	for range 20 {
		l, err := c.TryLock(ctx, testenv.Key(t), time.Second)
		require.NoError(t, err)
		ms := collect(t, reader)
		require.Equal(t, int64(1), gauge(t, ms, "quorumlock.leases.held"))
		seen = gauge(t, ms, "quorumlock.nodes.quarantined")
		require.LessOrEqual(t, seen, int64(2))
		require.NoError(t, l.Release(ctx))
		if seen == 2 {
			break
		}
	}
	require.Equal(t, int64(2), seen)
}

func TestMetrics_HeldDurationAndWaitByOutcome(t *testing.T) {
	reader, mp := meters(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMeterProvider(mp))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, l.Release(ctx))
	// A lease that runs out without Release counts as lost.
	short, err := c.TryLock(ctx, testenv.Key(t), 100*time.Millisecond)
	require.NoError(t, err)
	<-short.Done()
	// Bad input touches no node and is not a wait.
	_, err = c.TryLock(ctx, "", time.Second)
	require.Error(t, err)

	ms := collect(t, reader)
	require.Equal(t, map[string]uint64{"obtained": 2, "held": 1},
		histCounts(t, ms, "quorumlock.lock.wait.duration", outcomeKey))
	require.Equal(t, map[string]uint64{"released": 1, "lost": 1},
		histCounts(t, ms, "quorumlock.lease.held.duration", outcomeKey))
	h := ms["quorumlock.lease.held.duration"].Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		v, _ := dp.Attributes.Value(outcomeKey)
		if v.AsString() == "released" {
			require.GreaterOrEqual(t, dp.Sum, 0.02, "held at least the 20ms slept")
		}
	}
}

func TestMetrics_KeyAttributeOnlyWhenAsked(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	for _, withKey := range []bool{false, true} {
		reader, mp := meters(t)
		opts := []Option{WithMeterProvider(mp)}
		if withKey {
			opts = append(opts, WithKeyAttribute())
		}
		c, _ := cl.ready(t, opts...)
		key := testenv.Key(t)
		l, err := c.TryLock(ctx, key, time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Extend(ctx, time.Second))
		require.NoError(t, l.Release(ctx))
		ms := collect(t, reader)
		for _, name := range []string{"quorumlock.acquisitions", "quorumlock.extends"} {
			s := ms[name].Data.(metricdata.Sum[int64])
			require.NotEmpty(t, s.DataPoints, name)
			for _, dp := range s.DataPoints {
				v, ok := dp.Attributes.Value(keyKey)
				require.Equal(t, withKey, ok, "%s: key attribute present", name)
				if withKey {
					require.Equal(t, key, v.AsString(), name)
				}
			}
		}
		for _, name := range []string{"quorumlock.acquire.duration", "quorumlock.lock.wait.duration", "quorumlock.lease.held.duration"} {
			h := ms[name].Data.(metricdata.Histogram[float64])
			require.NotEmpty(t, h.DataPoints, name)
			for _, dp := range h.DataPoints {
				_, ok := dp.Attributes.Value(keyKey)
				require.Equal(t, withKey, ok, "%s: key attribute present", name)
			}
		}
	}
}

func TestMetrics_ConfigErrorsCountedByKind(t *testing.T) {
	reader, mp := meters(t)
	cl := newCluster(t, 5)
	_, _ = cl.ready(t) // the deployment's max ttl: the default minute
	other := cl.client(t, WithMeterProvider(mp), WithMaxTTL(2*time.Minute))
	ctx := context.Background()
	_, err := other.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
	_, err = other.Lock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.ErrorIs(t, other.Bootstrap(ctx), ErrConfigMismatch)

	s, ok := collect(t, reader)["quorumlock.config.errors"].Data.(metricdata.Sum[int64])
	require.True(t, ok)
	counts := map[string]int64{}
	for _, dp := range s.DataPoints {
		v, _ := dp.Attributes.Value(kindKey)
		counts[v.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"settings": 3}, counts, "one per call that returned the error")
	// The nodes are healthy: it is this client's settings that differ.
	if ne, ok := collect(t, reader)["quorumlock.node.errors"].Data.(metricdata.Sum[int64]); ok {
		for _, dp := range ne.DataPoints {
			require.Zero(t, dp.Value, "a settings mismatch counted as an error of the node %v", dp.Attributes.ToSlice())
		}
	}
}

func TestMetrics_ConfigErrorsCountRefusingNodes(t *testing.T) {
	reader, mp := meters(t)
	cl := newCluster(t, 5)
	_, _ = cl.ready(t)
	c := cl.client(t, WithMeterProvider(mp))
	ctx := context.Background()
	// Three nodes stop letting the client run scripts after New: a
	// refusal of a majority is a configuration error, counted as such.
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.raw[i].Do(ctx, "ACL", "SETUSER", "default", "-@scripting").Err())
		t.Cleanup(func() { _ = cl.raw[i].Do(ctx, "ACL", "SETUSER", "default", "+@all").Err() })
	}
	_, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrNodeRefused)
	require.ErrorIs(t, err, ErrConfigMismatch)

	s, ok := collect(t, reader)["quorumlock.config.errors"].Data.(metricdata.Sum[int64])
	require.True(t, ok)
	counts := map[string]int64{}
	for _, dp := range s.DataPoints {
		v, _ := dp.Attributes.Value(kindKey)
		counts[v.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"refused": 1}, counts)
}

func TestMetrics_ConfigErrorsCountADuplicateNode(t *testing.T) {
	reader, mp := meters(t)
	ctx := context.Background()
	cl, sock := aliasedCluster(t)
	good := cl.client(t)
	require.NoError(t, good.Bootstrap(ctx))
	bad := cl.listedTwice(t, sock, WithMeterProvider(mp))

	// Another owner holds the key on nodes 1-3, so an attempt waits for
	// node 0's two entries, which makes the client check them; from then
	// on it is refused for good.
	key := testenv.Key(t)
	cl.hold(t, key, time.Minute, 1, 2, 3)
	var dups int64
	for range 20 {
		_, err := bad.TryLock(ctx, key, time.Second)
		require.Error(t, err)
		var dup *DuplicateNodeError
		if errors.As(err, &dup) {
			dups++
		}
		if dups == 2 {
			break
		}
	}
	require.Equal(t, int64(2), dups, "the duplicate was never found")

	s, ok := collect(t, reader)["quorumlock.config.errors"].Data.(metricdata.Sum[int64])
	require.True(t, ok)
	counts := map[string]int64{}
	for _, dp := range s.DataPoints {
		v, _ := dp.Attributes.Value(kindKey)
		counts[v.AsString()] += dp.Value
	}
	require.Equal(t, map[string]int64{"duplicate_node": dups}, counts)
}
