package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// BenchmarkReconfigure_Downtime measures what a change of max ttl costs on
// five local nodes while a lease of the old settings is held: the time
// from Reconfigure's start to the first lease of the new settings
// (ms-to-new-lease), and the window in which no client could lock: from
// the first refusal of an old client to that lease (ms-no-lock). Both
// clients try every millisecond. Each iteration is one change, back and
// forth between max ttl M and M+1ms, so the expected figure is about one
// quarantine of M+1ms (M*1.01 + 2ms) plus a few round trips:
//
//	go test -run '^$' -bench Reconfigure -benchtime 5x ./redlock/
func BenchmarkReconfigure_Downtime(b *testing.B) {
	for _, m := range []time.Duration{200 * time.Millisecond, time.Second} {
		b.Run(fmt.Sprintf("maxttl=%v", m), func(b *testing.B) {
			nodes := benchCluster(b)
			ctx := context.Background()
			ttls := [2]time.Duration{m, m + time.Millisecond}
			boot, err := redlock.New(nodes, redlock.WithMaxTTL(ttls[0]))
			if err != nil {
				b.Fatal(err)
			}
			if err := boot.Bootstrap(ctx); err != nil {
				b.Fatal(err)
			}
			boot.Close()
			var toLease, noLock time.Duration
			for i := 0; b.Loop(); i++ {
				from, to := ttls[i%2], ttls[(i+1)%2]
				a, c := downtime(b, nodes, from, to)
				toLease += a
				noLock += c
			}
			b.ReportMetric(float64(toLease.Milliseconds())/float64(b.N), "ms-to-new-lease")
			b.ReportMetric(float64(noLock.Milliseconds())/float64(b.N), "ms-no-lock")
			q, _ := redlock.Quarantine(m+time.Millisecond, redlock.DefaultDriftFactor)
			b.ReportMetric(float64(q.Milliseconds()), "ms-holdoff")
		})
	}
}

// downtime runs one change of max ttl from to to on nodes.
func downtime(b *testing.B, nodes []redis.UniversalClient, from, to time.Duration) (toLease, noLock time.Duration) {
	ctx := context.Background()
	oldc, err := redlock.New(nodes, redlock.WithMaxTTL(from))
	if err != nil {
		b.Fatal(err)
	}
	defer oldc.Close()
	newc, err := redlock.New(nodes, redlock.WithMaxTTL(to))
	if err != nil {
		b.Fatal(err)
	}
	defer newc.Close()
	key := testenv.Key(b)
	if _, err := oldc.TryLock(ctx, key, from); err != nil {
		b.Fatal(err)
	}
	refused := make(chan time.Time, 1)
	go func() {
		var at time.Time
		assert.Eventually(b, func() bool {
			_, err := oldc.TryLock(ctx, testenv.Key(b), from)
			at = time.Now()
			return errors.Is(err, redlock.ErrConfigMismatch)
		}, time.Minute, time.Millisecond, "the old client was never refused")
		refused <- at
	}()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- newc.Reconfigure(ctx, nodes, redlock.WithMaxTTL(from)) }()
	var l *redlock.Lease
	var at time.Time
	require.Eventually(b, func() bool {
		var err error
		l, err = newc.TryLock(ctx, key, to)
		at = time.Now()
		return err == nil
	}, time.Minute, time.Millisecond, "no lease of the new settings")
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	_ = l.Release(ctx)
	return at.Sub(start), at.Sub(<-refused)
}
