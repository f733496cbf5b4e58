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

// A transfer between two accounts holds both accounts' keys at once. The
// order the keys are listed in does not matter: every caller takes them in
// byte order, so two transfers in opposite directions cannot deadlock.
func ExampleClient_DoAll() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	from, to := "accounts:42", "accounts:17"
	err = c.DoAll(ctx, []string{from, to}, 5*time.Second, func(ctx context.Context, s *redlock.LeaseSet) error {
		// ctx ends as soon as any one of the leases is lost. Each account
		// is fenced with the token of its own key.
		tokens := map[string]uint64{}
		for _, l := range s.Leases() {
			tokens[l.Key()] = l.FencingToken()
		}
		return transfer(ctx, from, tokens[from], to, tokens[to], 100)
	})
	if err != nil {
		log.Fatal(err)
	}
}

// transfer would move amount between the two rows in one database
// transaction, checking each row against its own key's token (see package
// fencing).
func transfer(ctx context.Context, from string, fromToken uint64, to string, toToken uint64, amount int) error {
	return nil
}

func ExampleClient_TryLockAll() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := c.TryLockAll(ctx, []string{"shelves:3", "shelves:1"}, 10*time.Second)
	if redlock.IsHeld(err) {
		// Nothing is held: the keys taken before the busy one were released.
		fmt.Println("a shelf is busy:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer s.Release(ctx)
	// Act as the holder of both shelves until the earliest deadline.
	fmt.Println("both held until", s.Deadline())
}
