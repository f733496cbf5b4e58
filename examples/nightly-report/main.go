// Command nightly-report is the README's example: a report that whichever
// instance of a service holds the lock writes into PostgreSQL, fenced.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	// Five independent Redis primaries (no replication between them),
	// from the variables the quorumlock command reads: QUORUMLOCK_NODES,
	// QUORUMLOCK_PASSWORD, QUORUMLOCK_MAX_TTL, ...
	cfg, err := redlock.ConfigFromEnv()
	if err != nil {
		return err
	}
	// Open builds a go-redis client per node and admits a brand-new
	// deployment at once (Bootstrap); on one in use it admits nothing,
	// so it is safe at every start.
	c, err := redlock.Open(ctx, cfg, redlock.WithFencing())
	if err != nil {
		return err
	}
	defer c.Close()

	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer db.Close()
	// The table and its fence column (Setup adds it if missing).
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

	// Do waits for the lock, keeps it extended while fn runs, and releases
	// it. fn's ctx ends if the lease is lost. Upsert inserts the report's
	// row or updates it, and refuses the write if a newer holder's token
	// reached the row first (fencing.ErrStaleToken). A write computed from
	// what it read takes guard.Update instead (claim first, then write).
	return c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		err := guard.Upsert(ctx, db, "nightly", l, fencing.Values{"body": "all systems nominal"})
		if err == nil {
			fmt.Println("report written with fencing token", l.FencingToken())
		}
		return err
	})
}
