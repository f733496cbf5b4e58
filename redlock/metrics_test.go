package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	c, rc := newTestClient(t, 5, WithMeterProvider(mp))
	ctx := context.Background()
	l, err := c.TryLock(ctx, "k", time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, l.Extend(ctx, time.Second))
	for _, r := range rc.raw {
		require.NoError(t, r.Set(ctx, "k", "thief", time.Minute).Err())
	}
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
