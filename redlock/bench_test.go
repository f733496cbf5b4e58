package redlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// The benchmarks run on five local redis-server nodes with default go-redis
// clients. Compare BenchmarkLockRelease with BenchmarkFloor, two parallel
// PING rounds to the same nodes (an acquire round and a release round with
// no work), measured in the same run:
//
//	go test -run '^$' -bench . -benchmem -count 5 ./redlock/ | tee out.txt
//	benchstat out.txt

func benchCluster(b *testing.B) []redis.UniversalClient {
	b.Helper()
	return testenv.Clients(b, testenv.RedisNodes(b, 5))
}

func benchLockRelease(b *testing.B, nodes []redis.UniversalClient, opts ...redlock.Option) {
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	key := testenv.Key(b)
	warm, err := c.TryLock(ctx, key, 10*time.Second) // admission and script load
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLockRelease(b *testing.B) {
	benchLockRelease(b, benchCluster(b))
}

func BenchmarkLockReleaseFenced(b *testing.B) {
	benchLockRelease(b, benchCluster(b), redlock.WithFencing())
}

// BenchmarkLockReleaseTwoFrozen is Lock+Release with two of the five nodes
// SIGSTOPped and the clients left at go-redis defaults.
func BenchmarkLockReleaseTwoFrozen(b *testing.B) {
	nodes := testenv.RedisNodes(b, 5)
	clients := testenv.Clients(b, nodes)
	c, err := redlock.New(clients)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if l, err := c.TryLock(ctx, testenv.Key(b), time.Second); err == nil {
		_ = l.Release(ctx)
	}
	for _, n := range nodes[3:] {
		if err := n.Pause(); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, n := range nodes[3:] {
			_ = n.Resume()
		}
		c.Close()
	}()
	key := testenv.Key(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		l, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloor is the round-trip floor: two rounds of PING sent to all
// five nodes at once, each waiting for every reply.
func BenchmarkFloor(b *testing.B) {
	nodes := benchCluster(b)
	ctx := context.Background()
	round := func() {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if err := n.Ping(ctx).Err(); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	round()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		round()
		round()
	}
}
