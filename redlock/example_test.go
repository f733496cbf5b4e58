package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// Five independent primaries; the examples need them running, so they have
// no Output lines and are only compiled by go test.
func nodes() []redis.UniversalClient {
	var out []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"} {
		// ContextTimeoutEnabled lets per-node deadlines cut the socket wait;
		// without it a frozen node's call runs on in the background until
		// ReadTimeout (it never delays the lock itself).
		out = append(out, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	return out
}

func Example() {
	c, err := redlock.New(nodes())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	err = c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		// ctx ends if the lease is lost: stop acting as the holder then.
		return generateReport(ctx)
	})
	if err != nil {
		log.Fatal(err)
	}
}

func generateReport(context.Context) error { return nil }

func ExampleClient_TryLock() {
	c, err := redlock.New(nodes())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, err := c.TryLock(ctx, "jobs:cleanup", 30*time.Second)
	if redlock.IsHeld(err) {
		fmt.Println("someone else is cleaning up")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	fmt.Println("valid until", l.Deadline())
}

func ExampleWithFencing() {
	c, err := redlock.New(nodes(), redlock.WithFencing(), redlock.WithMaxTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx := context.Background()
	l, err := c.Lock(ctx, "accounts:42", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	// Pass the token to the resource with every write; it refuses tokens
	// older than one it has seen (see package fencing).
	fmt.Println("token", l.FencingToken())
}
