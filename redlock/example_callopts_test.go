package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// A cron job that skips its run while another copy holds the lock, and
// says who it is for "quorumlock status" and Inspect.
func ExampleClient_TryDo() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	host, _ := os.Hostname()
	who := redlock.WithMetadata(fmt.Sprintf("host=%s pid=%d job=nightly-report", host, os.Getpid()))
	err = c.TryDo(ctx, "nightly-report", 30*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		return generateReport(ctx)
	}, who)
	if redlock.IsHeld(err) { // another instance runs it: skip this turn
		ks, _ := c.Inspect(ctx, "nightly-report")
		if ks != nil {
			fmt.Println("skipped: held by", ks.Metadata)
		}
		return
	}
	if redlock.IsUnavailable(err) { // nobody could take it: alert
		log.Fatal("lock service unavailable: ", err)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// WaitAtMost bounds the wait for the lock, not the work: fn's ctx ends
// only when the lease is lost or the caller's ctx ends.
func ExampleWaitAtMost() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	err = c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		return generateReport(ctx) // may run for an hour
	}, redlock.WaitAtMost(5*time.Second))
	if errors.Is(err, redlock.ErrNotObtained) {
		fmt.Println("not obtained within 5s:", err)
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}
