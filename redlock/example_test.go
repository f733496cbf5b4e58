package redlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// Five independent primaries; the examples need them running, so they have
// no Output lines and are only compiled by go test. A service reads them
// with redlock.ConfigFromEnv (see ExampleOpen).
var cfg = redlock.Config{Nodes: []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"}}

// Open builds a go-redis client per node and bootstraps a deployment
// nobody has used yet, so that the first lock does not wait a quarantine.
func ExampleOpen() {
	ctx := context.Background()
	cfg, err := redlock.ConfigFromEnv() // QUORUMLOCK_NODES, QUORUMLOCK_PASSWORD, ...
	if err != nil {
		log.Fatal(err)
	}
	c, err := redlock.Open(ctx, cfg, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
}

func Example() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

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
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

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
	ctx := context.Background()
	cfg := cfg
	cfg.MaxTTL = time.Minute
	c, err := redlock.Open(ctx, cfg, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	l, err := c.Lock(ctx, "accounts:42", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	// Pass the token to the resource with every write; it refuses tokens
	// older than one it has seen (see package fencing).
	fmt.Println("token", l.FencingToken())
}
