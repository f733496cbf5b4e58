package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quorumlock/quorumlock/fencing"
)

// These examples need a PostgreSQL database (DATABASE_URL) and a lock
// service, so they are compiled but not run.

// locker stands in for a *redlock.Client built with redlock.WithFencing();
// its leases satisfy fencing.Holder.
var locker interface {
	Lock(ctx context.Context, key string, ttl time.Duration) (fencing.Holder, error)
}

// The claim-first mode on an existing table: stamp the row, read it,
// compute, write it back. A holder whose lease expired while it worked is
// refused at the write, and nothing it computed is stored.
func ExampleGuard_Claim() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// accounts(id text primary key, balance bigint) gets a fence column.
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "accounts", KeyColumn: "id", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Setup(ctx, pool); err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "account:alice", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Claim(ctx, pool, "alice", lease); err != nil {
		log.Fatal(err) // ErrStaleToken: someone newer is already at work
	}
	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, "alice").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	err = g.WriteClaimed(ctx, pool, "alice", lease, fencing.Values{"balance": balance + 100})
	if errors.Is(err, fencing.ErrStaleToken) {
		fmt.Println("lost the lock while working; nothing was written")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
}

// Update runs the same claim-first steps around a function that reads and
// computes.
func ExampleGuard_Update() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "counters", KeyColumn: "name", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "counter:visits", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	err = g.Update(ctx, pool, "visits", lease, func(ctx context.Context) (fencing.Values, error) {
		var n int64
		err := pool.QueryRow(ctx, `SELECT n FROM counters WHERE name = $1`, "visits").Scan(&n)
		return fencing.Values{"n": n + 1}, err
	})
	var stale *fencing.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Printf("token %d refused, fence is at %d\n", stale.Token, stale.Current)
	}
}

// The write-only mode: the cheapest check, for writes that do not depend
// on a previous read (here: overwrite a status).
func ExampleGuard_Write() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "jobs", KeyColumn: "id", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "job:42", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	err = g.Write(ctx, pool, 42, lease, fencing.Values{"status": "done", "finished_at": time.Now()})
	switch {
	case errors.Is(err, fencing.ErrAlreadyWritten): // before ErrStaleToken, which it also matches
		fmt.Println("this lease already wrote job 42: a token writes once in write-only mode")
	case errors.Is(err, fencing.ErrStaleToken):
		fmt.Println("a newer worker owns job 42")
	}
}

// Several writes with one lease (a status, then the result): claim the
// row once, then WriteClaimed as often as needed. Write would refuse the
// second write with ErrAlreadyWritten.
func ExampleGuard_WriteClaimed() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "jobs", KeyColumn: "id", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "job:42", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if err := g.Claim(ctx, pool, 42, lease); err != nil {
		log.Fatal(err)
	}
	for _, status := range []string{"processing", "done"} {
		err := g.WriteClaimed(ctx, pool, 42, lease, fencing.Values{"status": status})
		if errors.Is(err, fencing.ErrStaleToken) {
			fmt.Println("a newer worker claimed job 42; stop")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

// The fence-table mode: any schema, no extra column; the claim and the
// caller's statements commit together or not at all.
func ExampleFenceTable_InTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	if err != nil {
		log.Fatal(err)
	}
	if err := f.Setup(ctx, pool); err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "inventory", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// Bound the transaction by the lease: a holder stalled inside it
	// holds newer holders off until it ends.
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = f.InTx(ctx, pool, "inventory", lease, func(ctx context.Context, tx pgx.Tx) error {
		var stock int
		if err := tx.QueryRow(ctx, `SELECT stock FROM items WHERE sku = $1`, "X1").Scan(&stock); err != nil {
			return err
		}
		if stock == 0 {
			return errors.New("sold out") // rolls back the claim too
		}
		_, err := tx.Exec(ctx, `UPDATE items SET stock = $1 WHERE sku = $2`, stock-1, "X1")
		return err
	})
	if errors.Is(err, fencing.ErrStaleToken) {
		fmt.Println("a newer holder got there first; nothing was written")
	}
}

// A write whose reply was lost may or may not be committed. Write checks
// "fence < token", so sending the same write again with the same lease
// lands at most once; a refusal at the holder's own token says that an
// earlier attempt was the one that landed.
func ExampleOutcomeUnknownError() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "jobs", KeyColumn: "id", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}

	lease, err := locker.Lock(ctx, "job:42", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	vals := fencing.Values{"status": "done"}
	for attempt := 1; ; attempt++ {
		err = g.Write(ctx, pool, 42, lease, vals)
		var stale *fencing.StaleTokenError
		switch {
		case err == nil:
			fmt.Println("written")
			return
		case errors.As(err, &stale) && attempt > 1 && stale.Current == stale.Token:
			fmt.Println("written by an earlier attempt")
			return
		case errors.Is(err, fencing.ErrStaleToken):
			fmt.Println("a newer worker owns job 42")
			return
		case errors.Is(err, fencing.ErrOutcomeUnknown) && attempt < 3:
			// Same lease, same values; only while the lease is valid.
			continue
		default:
			log.Fatal(err) // not committed, or still unknown after 3 tries
		}
	}
}

// Claim-first after a lost reply: a claim is settled by reading the fence;
// a claimed write by sending the same values again, never values
// recomputed from a new read (which would already include a write that
// landed).
func ExampleGuard_Claim_outcomeUnknown() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "accounts", KeyColumn: "id", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Lock(ctx, "account:alice", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}

	err = g.Claim(ctx, pool, "alice", lease)
	if errors.Is(err, fencing.ErrOutcomeUnknown) {
		fence, ferr := g.Fence(ctx, pool, "alice")
		switch {
		case ferr != nil:
			log.Fatal(ferr)
		case fence == lease.FencingToken():
			err = nil // the claim landed
		case fence < lease.FencingToken():
			err = g.Claim(ctx, pool, "alice", lease) // it did not (yet): claim again
		default:
			err = fmt.Errorf("a newer holder claimed alice (fence %d)", fence)
		}
	}
	if err != nil {
		log.Fatal(err) // ErrStaleToken included: someone newer is at work
	}

	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = $1`, "alice").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	vals := fencing.Values{"balance": balance + 100}
	err = g.WriteClaimed(ctx, pool, "alice", lease, vals)
	if errors.Is(err, fencing.ErrOutcomeUnknown) {
		err = g.WriteClaimed(ctx, pool, "alice", lease, vals) // the same vals
	}
	if err != nil {
		log.Fatal(err)
	}
}

// The fence table after a lost COMMIT reply: running InTx again with the
// same lease is safe. Its claim waits for a transaction that may still be
// committing and passes only if that one did not commit; fn then reads the
// data afresh.
func ExampleFenceTable_InTx_outcomeUnknown() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Lock(ctx, "inventory", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	sell := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE items SET stock = stock - 1 WHERE sku = $1 AND stock > 0`, "X1")
		return err
	}

	err = f.InTx(ctx, pool, "inventory", lease, sell)
	if errors.Is(err, fencing.ErrOutcomeUnknown) {
		err = f.InTx(ctx, pool, "inventory", lease, sell)
		var stale *fencing.StaleTokenError
		if errors.As(err, &stale) && stale.Current == stale.Token {
			err = nil // the first attempt committed; fn did not run again
		}
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sold one")
}
