package fencing_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// holder is a fake lease: just a token. Tests with real leases live with the
// redlock integration tests.
type holder uint64

func (h holder) FencingToken() uint64 { return uint64(h) }

// newPool returns a pool on a fresh database, closed when t ends.
func newPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), newDSN(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// counterKey is the one row most tests fight over.
const counterKey = "c"

// setupCounter creates a counters table with one row (n = 0, empty
// history). history records the token of every accepted write, in commit
// order, so a lost update or an out-of-order write shows in it.
func setupCounter(t testing.TB, db fencing.DB) {
	t.Helper()
	ctx := context.Background()
	_, err := db.Exec(ctx, `CREATE TABLE counters (
		name    text PRIMARY KEY,
		n       bigint NOT NULL DEFAULT 0,
		history bigint[] NOT NULL DEFAULT '{}')`)
	require.NoError(t, err)
	_, err = db.Exec(ctx, `INSERT INTO counters (name) VALUES ($1)`, counterKey)
	require.NoError(t, err)
}

// guardCounter adds a fence column to counters and returns its Guard.
func guardCounter(t testing.TB, db fencing.DB) *fencing.Guard {
	t.Helper()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "counters", KeyColumn: "name", FenceColumn: "fence"})
	require.NoError(t, err)
	require.NoError(t, g.Setup(context.Background(), db))
	return g
}

// increment is the read-compute-write a critical section does: the values
// to store are computed from what was read.
func increment(n int64, hist []int64, h holder) fencing.Values {
	return fencing.Values{"n": n + 1, "history": append(hist, int64(h))}
}

// claimFirstIncrement increments the counter in claim-first mode, reading
// through db after the claim.
func claimFirstIncrement(ctx context.Context, g *fencing.Guard, db fencing.DB, h holder) error {
	return g.Update(ctx, db, counterKey, h, func(ctx context.Context) (fencing.Values, error) {
		n, hist, err := loadCounter(ctx, db)
		return increment(n, hist, h), err
	})
}

// incrementTx increments the counter inside a fence-table transaction; the
// counters table needs no fence column for that.
func incrementTx(ctx context.Context, tx pgx.Tx, h holder) error {
	n, hist, err := loadCounter(ctx, tx)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE counters SET n = $1, history = $2 WHERE name = $3`, n+1, append(hist, int64(h)), counterKey)
	return err
}

// waitForLockWaiters waits until n sessions of this database wait on a lock.
func waitForLockWaiters(t testing.TB, db querier, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting int
		err := db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting >= n
	}, 10*time.Second, 5*time.Millisecond, "no session blocked on the fence row")
}

// setupFenceTable creates the fence table and returns it.
func setupFenceTable(t testing.TB, db fencing.DB) *fencing.FenceTable {
	t.Helper()
	f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	require.NoError(t, err)
	require.NoError(t, f.Setup(context.Background(), db))
	return f
}

// querier is what reading the counter needs; pools, conns and txs have it.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readCounter returns the counter's value and history.
func readCounter(t testing.TB, db querier) (int64, []int64) {
	t.Helper()
	n, hist, err := loadCounter(context.Background(), db)
	require.NoError(t, err)
	return n, hist
}

// loadCounter is readCounter for goroutines, which must not call t.Fatal.
func loadCounter(ctx context.Context, db querier) (n int64, hist []int64, err error) {
	err = db.QueryRow(ctx, `SELECT n, history FROM counters WHERE name = $1`, counterKey).Scan(&n, &hist)
	return n, hist, err
}

// requireStale asserts that err is a stale-token refusal of token by a fence
// of current.
func requireStale(t testing.TB, err error, token, current uint64) {
	t.Helper()
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	var se *fencing.StaleTokenError
	require.ErrorAs(t, err, &se)
	require.Equal(t, token, se.Token, "refused token")
	require.Equal(t, current, se.Current, "fence at refusal")
}
