// Command nightly-report is the README's example: a report that whichever
// instance of a service holds the lock writes into PostgreSQL, fenced.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// QUORUMLOCK_NODES lists the five Redis primaries (host:port,...) and
// DATABASE_URL names the PostgreSQL database.
func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context) error {
	// Five independent Redis primaries (no replication between them).
	// ContextTimeoutEnabled lets the per-node deadlines cut a silent node's
	// socket wait short.
	var nodes []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("QUORUMLOCK_NODES"), ",") {
		rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rc.Close()
		nodes = append(nodes, rc)
	}
	c, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		return err
	}
	defer c.Close()

	// Admits a brand-new deployment at once; admits nothing once it is in
	// use, so it is safe at every start.
	if err := c.Bootstrap(ctx); err != nil && !errors.Is(err, redlock.ErrNotNew) {
		return err
	}

	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	// The table, its fence column (Setup adds it if missing) and the
	// report's row: the guard updates rows, it does not insert them.
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS reports (name text PRIMARY KEY, body text)`); err != nil {
		return err
	}
	guard, err := fencing.NewGuard(fencing.GuardConfig{Table: "reports", KeyColumn: "name", FenceColumn: "fence"})
	if err != nil {
		return err
	}
	if err := guard.Setup(ctx, db); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `INSERT INTO reports (name) VALUES ('nightly') ON CONFLICT DO NOTHING`); err != nil {
		return err
	}

	// Do waits for the lock, keeps it extended while fn runs, and releases
	// it. fn's ctx ends if the lease is lost; the guard refuses the write
	// if a newer holder's token reached the row first (fencing.ErrStaleToken).
	return c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		err := guard.Update(ctx, db, "nightly", l, func(ctx context.Context) (fencing.Values, error) {
			return fencing.Values{"body": "all systems nominal"}, nil
		})
		if err == nil {
			fmt.Println("report written with fencing token", l.FencingToken())
		}
		return err
	})
}
