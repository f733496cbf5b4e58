package fencing_test

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

const evil = `a"; drop table x; --`

// requireVictimIntact asserts that table x, the target of every injection
// attempt, still exists with its one row.
func requireVictimIntact(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM x`).Scan(&n))
	require.Equal(t, 1, n)
}

func requirePgCode(t *testing.T, err error, code string) {
	t.Helper()
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, code, pgErr.Code, pgErr.Message)
}

// Names that would break out of the SQL if spliced in raw are just odd
// names: the mode works on a table so named, or the server refuses an
// unknown name, and nothing is ever injected.
func TestHostileIdentifiers(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	_, err := db.Exec(ctx, `CREATE TABLE x (v int); INSERT INTO x VALUES (1)`)
	require.NoError(t, err)

	t.Run("guard on an oddly named table works", func(t *testing.T) {
		schema, key, fence, col := `s"."x`, `k"ey`, `fence"; drop table x; --`, `n'; drop table x; --`
		_, err := db.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
		require.NoError(t, err)
		_, err = db.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, evil}.Sanitize()+
			" ("+pgx.Identifier{key}.Sanitize()+" text PRIMARY KEY, "+pgx.Identifier{col}.Sanitize()+" int)")
		require.NoError(t, err)
		_, err = db.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, evil}.Sanitize()+" VALUES ('r', 0)")
		require.NoError(t, err)

		g, err := fencing.NewGuard(fencing.GuardConfig{Schema: schema, Table: evil, KeyColumn: key, FenceColumn: fence})
		require.NoError(t, err)
		require.NoError(t, g.Setup(ctx, db))
		require.NoError(t, g.Setup(ctx, db), "Setup is idempotent")
		require.NoError(t, g.Write(ctx, db, "r", holder(5), fencing.Values{col: 1}))
		require.NoError(t, g.Claim(ctx, db, "r", holder(6)))
		require.NoError(t, g.WriteClaimed(ctx, db, "r", holder(6), fencing.Values{col: 2}))
		requireStale(t, g.Write(ctx, db, "r", holder(5), fencing.Values{col: 3}), 5, 6)
		got, err := g.Fence(ctx, db, "r")
		require.NoError(t, err)
		require.Equal(t, uint64(6), got)
		var v int
		require.NoError(t, db.QueryRow(ctx, "SELECT "+pgx.Identifier{col}.Sanitize()+" FROM "+
			pgx.Identifier{schema, evil}.Sanitize()).Scan(&v))
		require.Equal(t, 2, v)
		requireVictimIntact(t, db)
	})

	t.Run("fence table with an odd name works", func(t *testing.T) {
		f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: evil})
		require.NoError(t, err)
		require.NoError(t, f.Setup(ctx, db))
		require.NoError(t, f.Setup(ctx, db), "Setup is idempotent")
		res := `r'); drop table x; --`
		require.NoError(t, f.InTx(ctx, db, res, holder(7), func(context.Context, pgx.Tx) error { return nil }))
		got, err := f.Token(ctx, db, res)
		require.NoError(t, err)
		require.Equal(t, uint64(7), got)
		requireVictimIntact(t, db)
	})

	t.Run("unknown odd names are refused by the server", func(t *testing.T) {
		g, err := fencing.NewGuard(fencing.GuardConfig{Table: "x; drop table x", KeyColumn: "id", FenceColumn: "fence"})
		require.NoError(t, err)
		requirePgCode(t, g.Setup(ctx, db), "42P01") // undefined_table

		_, err = db.Exec(ctx, `CREATE TABLE plain (id int PRIMARY KEY, fence bigint NOT NULL DEFAULT 0); INSERT INTO plain VALUES (1, 0)`)
		require.NoError(t, err)
		g, err = fencing.NewGuard(fencing.GuardConfig{Table: "plain", KeyColumn: "id", FenceColumn: "fence"})
		require.NoError(t, err)
		err = g.Write(ctx, db, 1, holder(1), fencing.Values{`fence" = 0, "id`: 2})
		requirePgCode(t, err, "42703") // undefined_column
		requireVictimIntact(t, db)
		got, err := g.Fence(ctx, db, 1)
		require.NoError(t, err)
		require.Zero(t, got, "nothing written")
	})
}

func TestGuardEdges(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	setupCounter(t, db)
	g := guardCounter(t, db)

	t.Run("missing row", func(t *testing.T) {
		err := g.Write(ctx, db, "nope", holder(1), fencing.Values{"n": 1})
		require.ErrorIs(t, err, fencing.ErrNoRow)
		require.NotErrorIs(t, err, fencing.ErrStaleToken)
		require.ErrorIs(t, g.Claim(ctx, db, "nope", holder(1)), fencing.ErrNoRow)
		_, err = g.Fence(ctx, db, "nope")
		require.ErrorIs(t, err, fencing.ErrNoRow)
	})
	t.Run("write without claim", func(t *testing.T) {
		err := g.WriteClaimed(ctx, db, counterKey, holder(1), fencing.Values{"n": 1})
		require.ErrorIs(t, err, fencing.ErrNotClaimed)
		require.NotErrorIs(t, err, fencing.ErrStaleToken)
	})
	t.Run("equal token is stale", func(t *testing.T) {
		require.NoError(t, g.Claim(ctx, db, counterKey, holder(10)))
		requireStale(t, g.Claim(ctx, db, counterKey, holder(10)), 10, 10)
		require.ErrorIs(t, g.Claim(ctx, db, counterKey, holder(10)), fencing.ErrAlreadyWritten)
		requireStale(t, g.Write(ctx, db, counterKey, holder(10), fencing.Values{"n": 5}), 10, 10)
		// The holder of the stamp may write as often as it likes.
		require.NoError(t, g.WriteClaimed(ctx, db, counterKey, holder(10), fencing.Values{"n": 5}))
		require.NoError(t, g.WriteClaimed(ctx, db, counterKey, holder(10), fencing.Values{"n": 6}))
		n, _ := readCounter(t, db)
		require.Equal(t, int64(6), n)
	})
	t.Run("MaxInt64 is the largest token", func(t *testing.T) {
		require.NoError(t, g.Write(ctx, db, counterKey, holder(math.MaxInt64), fencing.Values{"n": 7}))
		got, err := g.Fence(ctx, db, counterKey)
		require.NoError(t, err)
		require.Equal(t, uint64(math.MaxInt64), got)
	})
	t.Run("error in Update's function writes nothing", func(t *testing.T) {
		boom := errors.New("boom")
		_, err := db.Exec(ctx, `INSERT INTO counters (name) VALUES ('u')`)
		require.NoError(t, err)
		err = g.Update(ctx, db, "u", holder(3), func(context.Context) (fencing.Values, error) {
			return fencing.Values{"n": 100}, boom
		})
		require.ErrorIs(t, err, boom)
		var n int64
		require.NoError(t, db.QueryRow(ctx, `SELECT n FROM counters WHERE name = 'u'`).Scan(&n))
		require.Zero(t, n)
	})
}

// From a review: a second Guard.Write by one lease (status "processing",
// then "done") was refused with ErrStaleToken, whose doc says a newer
// holder owns the row, though nobody newer existed. It is refused with
// ErrAlreadyWritten, which still matches ErrStaleToken; a refusal by a
// newer token does not match ErrAlreadyWritten.
func TestGuard_ASecondWriteOfOneLeaseIsAlreadyWritten(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	setupCounter(t, db)
	g := guardCounter(t, db)

	require.NoError(t, g.Write(ctx, db, counterKey, holder(20), fencing.Values{"n": 1}))
	err := g.Write(ctx, db, counterKey, holder(20), fencing.Values{"n": 2})
	requireStale(t, err, 20, 20)
	require.ErrorIs(t, err, fencing.ErrAlreadyWritten)
	require.Contains(t, err.Error(), "already wrote")
	require.NotContains(t, err.Error(), "stale", "the message says a newer holder owns the row")
	n, _ := readCounter(t, db)
	require.Equal(t, int64(1), n, "the refused write was applied")

	// A newer holder writes: the older token is now stale, not "already written".
	require.NoError(t, g.Write(ctx, db, counterKey, holder(21), fencing.Values{"n": 3}))
	err = g.Write(ctx, db, counterKey, holder(20), fencing.Values{"n": 4})
	requireStale(t, err, 20, 21)
	require.NotErrorIs(t, err, fencing.ErrAlreadyWritten)

	// Several writes per lease: claim once, then WriteClaimed.
	require.NoError(t, g.Claim(ctx, db, counterKey, holder(22)))
	require.NoError(t, g.WriteClaimed(ctx, db, counterKey, holder(22), fencing.Values{"n": 5}))
	require.NoError(t, g.WriteClaimed(ctx, db, counterKey, holder(22), fencing.Values{"n": 6}))
	require.ErrorIs(t, g.Claim(ctx, db, counterKey, holder(22)), fencing.ErrAlreadyWritten)

	// The fence table: a second InTx with one token.
	f := setupFenceTable(t, db)
	noop := func(context.Context, pgx.Tx) error { return nil }
	require.NoError(t, f.InTx(ctx, db, "r", holder(30), noop))
	err = f.InTx(ctx, db, "r", holder(30), noop)
	require.ErrorIs(t, err, fencing.ErrAlreadyWritten)
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.NoError(t, f.InTx(ctx, db, "r", holder(31), noop))
	err = f.InTx(ctx, db, "r", holder(30), noop)
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.NotErrorIs(t, err, fencing.ErrAlreadyWritten)
}

func TestFenceTableEdges(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	setupCounter(t, db)
	f := setupFenceTable(t, db)

	t.Run("concurrent Setup", func(t *testing.T) {
		f2, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: "fresh_fences"})
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = f2.Setup(ctx, db) })
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
	})
	t.Run("unknown resource has token 0", func(t *testing.T) {
		got, err := f.Token(ctx, db, "never")
		require.NoError(t, err)
		require.Zero(t, got)
	})
	t.Run("fn error rolls back claim and work", func(t *testing.T) {
		boom := errors.New("boom")
		err := f.InTx(ctx, db, "r", holder(9), func(ctx context.Context, tx pgx.Tx) error {
			if err := incrementTx(ctx, tx, 9); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		got, err := f.Token(ctx, db, "r")
		require.NoError(t, err)
		require.Zero(t, got, "claim rolled back")
		n, _ := readCounter(t, db)
		require.Zero(t, n, "work rolled back")
	})
	t.Run("panic in fn rolls back", func(t *testing.T) {
		require.Panics(t, func() {
			_ = f.InTx(ctx, db, "r", holder(9), func(ctx context.Context, tx pgx.Tx) error {
				if err := incrementTx(ctx, tx, 9); err != nil {
					return err
				}
				panic("boom")
			})
		})
		n, _ := readCounter(t, db)
		require.Zero(t, n)
	})
}

// The database goes away in the middle of a fence-table transaction, after
// fn wrote and before the commit: neither the claim nor the write is
// committed. A context that ended before COMMIT proves it (pgconn sends
// nothing on a done context), so that error is a plain one; a terminated
// session does not (the same FATAL can follow a local commit), so that
// error reports an unknown outcome, which the table then resolves.
func TestDatabaseGoneMidWrite(t *testing.T) {
	tests := []struct {
		name string
		// cut ends the session pid from outside; it runs inside fn, after
		// fn's write.
		cut       func(t *testing.T, admin *pgxpool.Pool, pid uint32, cancel context.CancelFunc)
		checkErrs func(t *testing.T, err error)
	}{
		{
			name: "backend terminated",
			cut: func(t *testing.T, admin *pgxpool.Pool, pid uint32, _ context.CancelFunc) {
				var ok bool
				require.NoError(t, admin.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, pid).Scan(&ok))
				require.True(t, ok)
			},
			checkErrs: func(t *testing.T, err error) {
				// The server sends FATAL admin_shutdown before it exits,
				// and pg_terminate_backend waited for the exit, so the
				// driver normally reads that; a socket error is the only
				// other honest outcome.
				require.ErrorIs(t, err, fencing.ErrOutcomeUnknown)
				var pgErr *pgconn.PgError
				var netErr *net.OpError
				switch {
				case errors.As(err, &pgErr):
					require.Equal(t, "57P01", pgErr.Code) // admin_shutdown
				case errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				default:
					t.Fatalf("not a driver error: %v", err)
				}
			},
		},
		{
			name: "context cancelled",
			cut: func(t *testing.T, _ *pgxpool.Pool, _ uint32, cancel context.CancelFunc) {
				cancel()
			},
			checkErrs: func(t *testing.T, err error) {
				require.ErrorIs(t, err, context.Canceled)
				require.NotErrorIs(t, err, fencing.ErrOutcomeUnknown)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newPool(t)
			setupCounter(t, db)
			f := setupFenceTable(t, db)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			err := f.InTx(ctx, db, counterKey, holder(1), func(ctx context.Context, tx pgx.Tx) error {
				if err := incrementTx(ctx, tx, holder(1)); err != nil {
					return err
				}
				tc.cut(t, db, tx.Conn().PgConn().PID(), cancel)
				return nil // so the COMMIT is what meets the dead session
			})
			require.Error(t, err)
			require.ErrorContains(t, err, "commit: ", "the COMMIT met the dead session")
			require.NotErrorIs(t, err, fencing.ErrStaleToken)
			tc.checkErrs(t, err)

			n, hist := readCounter(t, db)
			require.Zero(t, n, "no partial write")
			require.Empty(t, hist)
			got, err := f.Token(context.Background(), db, counterKey)
			require.NoError(t, err)
			require.Zero(t, got, "claim not committed")
		})
	}
}
