package redlock

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// No password a client was built with shows in the library's errors, log
// records, span attributes, events or statuses, or metric attributes:
// with the right password, with a wrong one (the nodes refuse it), and
// with a node that is down. Nodes are named by the address their client
// dials. (Issue 36.)
func TestSecrets_NoErrorLogSpanOrMetricShowsThePassword(t *testing.T) {
	const right, wrong = "Redlock-Right-Pw-93ab", "Redlock-Wrong-Pw-1c07"
	cl := newCluster(t, 5)
	ctx := context.Background()
	for _, rc := range cl.raw {
		require.NoError(t, rc.ConfigSet(ctx, "requirepass", right).Err())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	require.NoError(t, ln.Close())

	// The clients' background work (a late straggler's release, say) may
	// still log while the test reads what was logged.
	var logs testenv.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sr, tp := recorder(t)
	reader, mp := meters(t)
	clientsWith := func(pw string, addrs ...string) []redis.UniversalClient {
		out := make([]redis.UniversalClient, len(addrs))
		for i, a := range addrs {
			rc := redis.NewClient(&redis.Options{Addr: a, Password: pw, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = rc.Close() })
			out[i] = rc
		}
		return out
	}
	addrs := make([]string, len(cl.nodes))
	for i, nd := range cl.nodes {
		addrs[i] = nd.Addr()
	}
	opts := []Option{WithLogger(logger), WithTracerProvider(tp), WithMeterProvider(mp), WithFencing(), WithMaxTTL(time.Second)}
	var errs []error

	good, err := New(clientsWith(right, addrs...), opts...)
	require.NoError(t, err)
	defer good.Close()
	require.NoError(t, good.Bootstrap(ctx))
	key := testenv.Key(t)
	require.NoError(t, good.Do(ctx, key, 300*time.Millisecond, func(ctx context.Context, l *Lease) error {
		_, err := good.TryLock(ctx, key, 300*time.Millisecond)
		errs = append(errs, err)
		_, err = good.Inspect(ctx, key)
		return err
	}))

	_, err = New(clientsWith(wrong, addrs...), opts...)
	errs = append(errs, err)
	refused, err := New(clientsWith(wrong, addrs...), append(opts, WithoutRefusalCheck())...)
	require.NoError(t, err)
	defer refused.Close()
	_, err = refused.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	errs = append(errs, err)
	ks, err := refused.Inspect(ctx, key)
	require.NoError(t, err)
	for _, n := range ks.Nodes {
		errs = append(errs, n.Err)
	}

	half, err := New(clientsWith(right, append(addrs[:2:2], down)...), append(opts, WithProbeTimeout(200*time.Millisecond))...)
	require.NoError(t, err)
	defer half.Close()
	_, err = half.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	errs = append(errs, err)

	var texts []string
	for _, e := range errs {
		require.Error(t, e, "every path above fails")
		texts = append(texts, e.Error())
	}
	require.NotEmpty(t, logs.String())
	texts = append(texts, logs.String())
	require.NotEmpty(t, sr.Ended())
	for _, s := range sr.Ended() {
		b, err := json.Marshal(map[string]any{"name": s.Name(), "attrs": s.Attributes(), "events": s.Events(), "status": s.Status()})
		require.NoError(t, err)
		texts = append(texts, string(b))
	}
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	b, err := json.Marshal(rm.ScopeMetrics)
	require.NoError(t, err)
	// Which nodes erred first depends on timing: the metrics name some of
	// them by address, so the check below sees the attributes.
	require.True(t, slices.ContainsFunc(append(addrs, down), func(a string) bool { return strings.Contains(string(b), a) }),
		"the metrics name no node by address: %s", b)
	texts = append(texts, string(b))

	all := strings.Join(texts, "\n")
	require.Contains(t, all, "WRONGPASS", "the refusals are in what was checked")
	require.Contains(t, all, down, "the node that is down is in what was checked")
	require.NotContains(t, all, right)
	require.NotContains(t, all, wrong)
}
