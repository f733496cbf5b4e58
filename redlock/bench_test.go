package redlock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

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

// benchLockRelease measures TryLock+Release on one key; before is called
// after the warm-up (admission, script load) and before timing starts.
func benchLockRelease(b *testing.B, nodes []redis.UniversalClient, before func(), opts ...redlock.Option) {
	c, err := redlock.New(nodes, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Bootstrap(ctx); err != nil { // a new deployment: admit it at once
		b.Fatal(err)
	}
	key := testenv.Key(b)
	warm, err := c.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		b.Fatal(err)
	}
	// Release returns at a majority; its last deletes land just after.
	// Wait for them: with nodes frozen by before, the first attempt needs
	// every other node free.
	require.Eventually(b, func() bool {
		for _, n := range nodes {
			if n.Exists(ctx, key).Val() != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the warm-up's key is still on a node")
	if before != nil {
		before()
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
	benchLockRelease(b, benchCluster(b), nil)
}

func BenchmarkLockReleaseFenced(b *testing.B) {
	benchLockRelease(b, benchCluster(b), nil, redlock.WithFencing())
}

// BenchmarkLockReleaseTwoFrozen is Lock+Release with two of the five nodes
// SIGSTOPped and the clients left at go-redis defaults.
func BenchmarkLockReleaseTwoFrozen(b *testing.B) {
	nodes := testenv.RedisNodes(b, 5)
	frozen := nodes[3:]
	// Resumed before the nodes are stopped and before Close waits for
	// calls stuck on them (cleanups run last-registered first).
	b.Cleanup(func() {
		for _, n := range frozen {
			_ = n.Resume()
		}
	})
	benchLockRelease(b, testenv.Clients(b, nodes), func() {
		for _, n := range frozen {
			if err := n.Pause(); err != nil {
				b.Fatal(err)
			}
		}
	})
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

// BenchmarkManyKeys is bench's many-keys scenario in miniature: 64
// goroutines, each looping Lock+Release on a key of its own, through one
// Client. Profile the client's side of it with -cpuprofile.
func BenchmarkManyKeys(b *testing.B) {
	c, err := redlock.New(benchCluster(b))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Bootstrap(ctx); err != nil {
		b.Fatal(err)
	}
	prefix := testenv.Key(b)
	var next atomic.Int64
	b.SetParallelism(32) // 64 goroutines on GOMAXPROCS=2
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprintf("%s:%d", prefix, next.Add(1))
		for pb.Next() {
			l, err := c.Lock(ctx, key, 10*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
