package redlock_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// A nightly report, written by whichever service instance holds the lock,
// into reports(name text primary key, body text) in PostgreSQL.
func Example_fencedReport() {
	ctx := context.Background()

	// Five independent Redis primaries (no replication between them).
	var nodes []redis.UniversalClient
	for _, addr := range []string{"redis-1:6379", "redis-2:6379", "redis-3:6379", "redis-4:6379", "redis-5:6379"} {
		nodes = append(nodes, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	c, err := redlock.New(nodes, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Admits a brand-new deployment at once; admits nothing once it is in use.
	if err := c.Bootstrap(ctx); err != nil && !errors.Is(err, redlock.ErrNotNew) {
		log.Fatal(err)
	}

	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	guard, err := fencing.NewGuard(fencing.GuardConfig{Table: "reports", KeyColumn: "name", FenceColumn: "fence"})
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Setup(ctx, db); err != nil { // adds the fence column if missing
		log.Fatal(err)
	}

	err = c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		// ctx ends if the lease is lost. The guard refuses the write if a newer
		// holder's token reached the row first (fencing.ErrStaleToken).
		return guard.Update(ctx, db, "nightly", l, func(ctx context.Context) (fencing.Values, error) {
			return fencing.Values{"body": "all systems nominal"}, nil
		})
	})
	if err != nil {
		log.Fatal(err)
	}
}
