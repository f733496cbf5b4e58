package fencing_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// Upsert writes a row that may not exist yet: the first holder inserts
// it with its token as the fence, later ones update it as Write does, and
// an older token (or the same one again) is refused and changes nothing.
func TestGuard_UpsertInsertsAMissingRowAndFencesLaterWrites(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	setupCounter(t, db)
	g := guardCounter(t, db)

	require.NoError(t, g.Upsert(ctx, db, "new", holder(5), fencing.Values{"n": 1}))
	got, err := g.Fence(ctx, db, "new")
	require.NoError(t, err)
	require.Equal(t, uint64(5), got)
	var n int64
	var hist []int64
	require.NoError(t, db.QueryRow(ctx, `SELECT n, history FROM counters WHERE name = 'new'`).Scan(&n, &hist))
	require.Equal(t, int64(1), n)
	require.Empty(t, hist, "a column not in vals did not take its default")

	require.NoError(t, g.Upsert(ctx, db, "new", holder(7), fencing.Values{"n": 2}))
	requireStale(t, g.Upsert(ctx, db, "new", holder(6), fencing.Values{"n": 3}), 6, 7)
	err = g.Upsert(ctx, db, "new", holder(7), fencing.Values{"n": 4})
	requireStale(t, err, 7, 7)
	require.ErrorIs(t, err, fencing.ErrAlreadyWritten)
	require.NoError(t, db.QueryRow(ctx, `SELECT n FROM counters WHERE name = 'new'`).Scan(&n))
	require.Equal(t, int64(2), n, "a refused upsert was applied")

	// The row Setup's fence column started at 0 for: any token writes it.
	require.NoError(t, g.Upsert(ctx, db, counterKey, holder(1), fencing.Values{"n": 9}))
	// Input errors touch nothing, as Write's.
	require.ErrorIs(t, g.Upsert(ctx, db, "", holder(1), fencing.Values{"n": 1}), fencing.ErrEmptyResource)
	require.ErrorIs(t, g.Upsert(ctx, db, "x", holder(1), fencing.Values{"fence": 1}), fencing.ErrInvalidIdentifier)
	require.ErrorIs(t, g.Upsert(ctx, db, "x", holder(0), fencing.Values{"n": 1}), fencing.ErrNoToken)
	require.ErrorContains(t, g.Upsert(ctx, db, "x", holder(1), fencing.Values{}), "no values to write")
	_, err = g.Fence(ctx, db, "x")
	require.ErrorIs(t, err, fencing.ErrNoRow, "a refused input inserted the row")
}

// Holders that all find the row missing at once: PostgreSQL sends every
// one but the first to the update branch, whose WHERE clause sees the
// inserted row, so the row ends with the largest token's values, whatever
// the order of the commits, and every smaller token that came after it is
// refused.
func TestGuard_UpsertsOfAMissingRowAtOnceLeaveTheLargestToken(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	setupCounter(t, db)
	g := guardCounter(t, db)

	const holders = 16
	for round := range 5 {
		key := "race-" + string(rune('a'+round))
		var wg sync.WaitGroup
		errs := make([]error, holders)
		for i := range holders {
			wg.Go(func() {
				errs[i] = g.Upsert(ctx, db, key, holder(100+i), fencing.Values{"n": 100 + i})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			if err == nil {
				ok++
				continue
			}
			require.ErrorIs(t, err, fencing.ErrStaleToken)
		}
		require.GreaterOrEqual(t, ok, 1)
		var n, fence int64
		require.NoError(t, db.QueryRow(ctx, `SELECT n, fence FROM counters WHERE name = $1`, key).Scan(&n, &fence))
		require.Equal(t, int64(100+holders-1), fence)
		require.Equal(t, int64(100+holders-1), n, "the row does not hold the largest token's values")
	}
}

// Without a unique index on the key column PostgreSQL cannot tell an
// insert from an update: the statement is refused (42P10) and writes
// nothing.
func TestGuard_UpsertNeedsAUniqueKey(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	_, err := db.Exec(ctx, `CREATE TABLE loose (name text, n bigint)`)
	require.NoError(t, err)
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "loose", KeyColumn: "name", FenceColumn: "fence"})
	require.NoError(t, err)
	require.NoError(t, g.Setup(ctx, db))
	err = g.Upsert(ctx, db, "a", holder(1), fencing.Values{"n": 1})
	requirePgCode(t, err, "42P10")
	require.NotErrorIs(t, err, fencing.ErrOutcomeUnknown)
	var rows int
	require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM loose`).Scan(&rows))
	require.Zero(t, rows)
}
