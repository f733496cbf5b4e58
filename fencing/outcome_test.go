package fencing_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// outcomeEnv is one fresh database with the counter row, reached directly
// (pool) and through a cutProxy (conn).
type outcomeEnv struct {
	pool  *pgxpool.Pool
	conn  *pgx.Conn
	proxy *cutProxy
	g     *fencing.Guard
	f     *fencing.FenceTable
}

func newOutcomeEnv(t *testing.T) *outcomeEnv {
	t.Helper()
	dsn := newDSN(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	setupCounter(t, pool)
	p := newCutProxy(t, targetOf(t, dsn))
	return &outcomeEnv{
		pool:  pool,
		conn:  proxied(t, p, dsn),
		proxy: p,
		g:     guardCounter(t, pool),
		f:     setupFenceTable(t, pool),
	}
}

// requireUnknown asserts err reports an unknown outcome of op for token,
// caused by the lost connection, not by anything PostgreSQL said.
func requireUnknown(t *testing.T, err error, op string, token uint64) *fencing.OutcomeUnknownError {
	t.Helper()
	require.ErrorIs(t, err, fencing.ErrOutcomeUnknown)
	require.NotErrorIs(t, err, fencing.ErrStaleToken)
	var ue *fencing.OutcomeUnknownError
	require.ErrorAs(t, err, &ue)
	require.Equal(t, op, ue.Op)
	require.Equal(t, token, ue.Token)
	require.Error(t, ue.Err, "the cause is kept")
	var pgErr *pgconn.PgError
	require.False(t, errors.As(err, &pgErr), "the server reported nothing: %v", err)
	return ue
}

func (e *outcomeEnv) fence(t *testing.T) uint64 {
	t.Helper()
	got, err := e.g.Fence(context.Background(), e.pool, counterKey)
	require.NoError(t, err)
	return got
}

// The connection breaks after PostgreSQL ran the statement or the COMMIT
// and before the client read the reply. The write is committed, so the
// error must say the outcome is unknown, never that nothing was written;
// and the recovery documented for each step must settle it.
func TestOutcomeUnknownAfterCommit(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, e *outcomeEnv)
	}{
		{"Write", func(t *testing.T, e *outcomeEnv) {
			e.proxy.arm(cutAfterReply)
			err := e.g.Write(ctx, e.conn, counterKey, holder(5), increment(0, nil, 5))
			e.proxy.requireFired(t)
			ue := requireUnknown(t, err, "Write", 5)
			require.Equal(t, "counters key c", ue.Resource)

			require.Equal(t, uint64(5), e.fence(t), "the write landed")
			// A retry with the same token cannot apply twice; a refusal at
			// the holder's own token says the first attempt landed.
			requireStale(t, e.g.Write(ctx, e.pool, counterKey, holder(5), increment(1, []int64{5}, 5)), 5, 5)
			n, hist := readCounter(t, e.pool)
			require.Equal(t, int64(1), n)
			require.Equal(t, []int64{5}, hist)
		}},
		{"Upsert of a missing row", func(t *testing.T, e *outcomeEnv) {
			e.proxy.arm(cutAfterReply)
			err := e.g.Upsert(ctx, e.conn, "fresh", holder(6), fencing.Values{"n": 1})
			e.proxy.requireFired(t)
			requireUnknown(t, err, "Upsert", 6)

			got, err := e.g.Fence(ctx, e.pool, "fresh")
			require.NoError(t, err, "the row was not inserted")
			require.Equal(t, uint64(6), got, "the insert landed")
			// A retry with the same token finds its own insert.
			err = e.g.Upsert(ctx, e.pool, "fresh", holder(6), fencing.Values{"n": 2})
			requireStale(t, err, 6, 6)
			require.ErrorIs(t, err, fencing.ErrAlreadyWritten)
			var n int64
			require.NoError(t, e.pool.QueryRow(ctx, `SELECT n FROM counters WHERE name = 'fresh'`).Scan(&n))
			require.Equal(t, int64(1), n)
		}},
		{"Claim", func(t *testing.T, e *outcomeEnv) {
			e.proxy.arm(cutAfterReply)
			err := e.g.Claim(ctx, e.conn, counterKey, holder(7))
			e.proxy.requireFired(t)
			requireUnknown(t, err, "Claim", 7)

			require.Equal(t, uint64(7), e.fence(t), "the claim landed")
			requireStale(t, e.g.Claim(ctx, e.pool, counterKey, holder(7)), 7, 7)
			// The stamp is the holder's: it may read and write.
			n, hist := readCounter(t, e.pool)
			require.NoError(t, e.g.WriteClaimed(ctx, e.pool, counterKey, holder(7), increment(n, hist, 7)))
			n, hist = readCounter(t, e.pool)
			require.Equal(t, int64(1), n)
			require.Equal(t, []int64{7}, hist)
		}},
		{"WriteClaimed", func(t *testing.T, e *outcomeEnv) {
			require.NoError(t, e.g.Claim(ctx, e.conn, counterKey, holder(8)))
			vals := increment(0, nil, 8)
			e.proxy.arm(cutAfterReply)
			err := e.g.WriteClaimed(ctx, e.conn, counterKey, holder(8), vals)
			e.proxy.requireFired(t)
			requireUnknown(t, err, "WriteClaimed", 8)

			n, hist := readCounter(t, e.pool)
			require.Equal(t, int64(1), n, "the write landed")
			require.Equal(t, []int64{8}, hist)
			// The same values again leave the row as one write did.
			require.NoError(t, e.g.WriteClaimed(ctx, e.pool, counterKey, holder(8), vals))
			n, hist = readCounter(t, e.pool)
			require.Equal(t, int64(1), n)
			require.Equal(t, []int64{8}, hist)
		}},
		{"Update's write", func(t *testing.T, e *outcomeEnv) {
			err := e.g.Update(ctx, e.conn, counterKey, holder(9), func(ctx context.Context) (fencing.Values, error) {
				n, hist, err := loadCounter(ctx, e.conn)
				e.proxy.arm(cutAfterReply) // after the claim and the read
				return increment(n, hist, 9), err
			})
			e.proxy.requireFired(t)
			requireUnknown(t, err, "WriteClaimed", 9)
			n, hist := readCounter(t, e.pool)
			require.Equal(t, int64(1), n, "the write landed")
			require.Equal(t, []int64{9}, hist)
			// Running Update again with the same lease does nothing.
			requireStale(t, claimFirstIncrement(ctx, e.g, e.pool, 9), 9, 9)
		}},
		{"InTx", func(t *testing.T, e *outcomeEnv) {
			err := e.f.InTx(ctx, e.conn, counterKey, holder(10), func(ctx context.Context, tx pgx.Tx) error {
				if err := incrementTx(ctx, tx, 10); err != nil {
					return err
				}
				e.proxy.arm(cutAfterReply) // the next reply is COMMIT's
				return nil
			})
			e.proxy.requireFired(t)
			ue := requireUnknown(t, err, "InTx", 10)
			require.Equal(t, counterKey, ue.Resource)

			got, err := e.f.Token(ctx, e.pool, counterKey)
			require.NoError(t, err)
			require.Equal(t, uint64(10), got, "the claim committed")
			n, hist := readCounter(t, e.pool)
			require.Equal(t, int64(1), n, "the work committed")
			require.Equal(t, []int64{10}, hist)
			// A retry with the same token is refused before fn runs.
			called := false
			err = e.f.InTx(ctx, e.pool, counterKey, holder(10), func(context.Context, pgx.Tx) error {
				called = true
				return nil
			})
			requireStale(t, err, 10, 10)
			require.False(t, called)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newOutcomeEnv(t))
		})
	}
}

// The connection breaks before the request reaches the server. The client
// cannot tell this from a lost reply, so the outcome is unknown as well:
// unknown means "may have been committed", and the documented recovery
// finds that it was not.
func TestOutcomeUnknownIncludesNeverSent(t *testing.T) {
	ctx := context.Background()
	t.Run("Write", func(t *testing.T) {
		e := newOutcomeEnv(t)
		e.proxy.arm(cutBeforeRequest)
		err := e.g.Write(ctx, e.conn, counterKey, holder(5), increment(0, nil, 5))
		e.proxy.requireFired(t)
		requireUnknown(t, err, "Write", 5)
		require.Zero(t, e.fence(t), "nothing reached the server")
		require.NoError(t, e.g.Write(ctx, e.pool, counterKey, holder(5), increment(0, nil, 5)), "the retry applies")
		n, hist := readCounter(t, e.pool)
		require.Equal(t, int64(1), n)
		require.Equal(t, []int64{5}, hist)
	})
	t.Run("InTx", func(t *testing.T) {
		e := newOutcomeEnv(t)
		err := e.f.InTx(ctx, e.conn, counterKey, holder(6), func(ctx context.Context, tx pgx.Tx) error {
			if err := incrementTx(ctx, tx, 6); err != nil {
				return err
			}
			e.proxy.arm(cutBeforeRequest) // COMMIT never arrives
			return nil
		})
		e.proxy.requireFired(t)
		requireUnknown(t, err, "InTx", 6)
		require.NoError(t, e.f.InTx(ctx, e.pool, counterKey, holder(6), func(ctx context.Context, tx pgx.Tx) error {
			return incrementTx(ctx, tx, 6)
		}), "the first attempt did not commit, so the retry's claim passes")
		n, hist := readCounter(t, e.pool)
		require.Equal(t, int64(1), n)
		require.Equal(t, []int64{6}, hist)
	})
}

// Failures that prove nothing was committed are plain errors, never
// ErrOutcomeUnknown, and indeed nothing is committed.
func TestNotAppliedIsNotUnknown(t *testing.T) {
	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()

	requireNotApplied := func(t *testing.T, e *outcomeEnv, err error) {
		t.Helper()
		require.Error(t, err)
		require.NotErrorIs(t, err, fencing.ErrOutcomeUnknown)
		require.NotErrorIs(t, err, fencing.ErrStaleToken)
		require.Zero(t, e.fence(t), "nothing committed")
		n, hist := readCounter(t, e.pool)
		require.Zero(t, n)
		require.Empty(t, hist)
		got, err := e.f.Token(ctx, e.pool, counterKey)
		require.NoError(t, err)
		require.Zero(t, got)
	}

	t.Run("context done before the call, connection", func(t *testing.T) {
		e := newOutcomeEnv(t)
		err := e.g.Write(cancelled, e.conn, counterKey, holder(3), increment(0, nil, 3))
		require.ErrorIs(t, err, context.Canceled)
		requireNotApplied(t, e, err)
	})
	t.Run("context done before the call, pool", func(t *testing.T) {
		e := newOutcomeEnv(t)
		err := e.g.Claim(cancelled, e.pool, counterKey, holder(3))
		require.ErrorIs(t, err, context.Canceled)
		requireNotApplied(t, e, err)
	})
	t.Run("connection closed before the call", func(t *testing.T) {
		e := newOutcomeEnv(t)
		require.NoError(t, e.conn.Close(ctx))
		requireNotApplied(t, e, e.g.Write(ctx, e.conn, counterKey, holder(3), increment(0, nil, 3)))
	})
	t.Run("server cannot be reached", func(t *testing.T) {
		e := newOutcomeEnv(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close()) // nothing listens there now
		dead, err := pgxpool.New(ctx, "postgres://nobody@"+addr+"/none?sslmode=disable&connect_timeout=5")
		require.NoError(t, err)
		defer dead.Close()
		err = e.g.Write(ctx, dead, counterKey, holder(3), increment(0, nil, 3))
		var connectErr *pgconn.ConnectError
		require.ErrorAs(t, err, &connectErr)
		requireNotApplied(t, e, err)
		err = e.f.InTx(ctx, dead, counterKey, holder(3), func(context.Context, pgx.Tx) error { return nil })
		requireNotApplied(t, e, err)
	})
	t.Run("statement refused by the server", func(t *testing.T) {
		e := newOutcomeEnv(t)
		_, err := e.pool.Exec(ctx, `ALTER TABLE counters ADD CONSTRAINT small CHECK (n < 100)`)
		require.NoError(t, err)
		err = e.g.Write(ctx, e.conn, counterKey, holder(3), fencing.Values{"n": 1000})
		requirePgCode(t, err, "23514") // check_violation
		requireNotApplied(t, e, err)
	})
	t.Run("COMMIT refused by the server", func(t *testing.T) {
		e := newOutcomeEnv(t)
		_, err := e.pool.Exec(ctx, `CREATE TABLE once (v int, CONSTRAINT once_v UNIQUE (v) DEFERRABLE INITIALLY DEFERRED)`)
		require.NoError(t, err)
		err = e.f.InTx(ctx, e.conn, counterKey, holder(3), func(ctx context.Context, tx pgx.Tx) error {
			if err := incrementTx(ctx, tx, 3); err != nil {
				return err
			}
			// Accepted now, checked at COMMIT.
			_, err := tx.Exec(ctx, `INSERT INTO once VALUES (1), (1)`)
			return err
		})
		requirePgCode(t, err, "23505") // unique_violation, at COMMIT
		require.ErrorContains(t, err, "commit: ")
		requireNotApplied(t, e, err)
	})
	t.Run("inside the caller's transaction", func(t *testing.T) {
		// Nothing the guard does is durable before the caller commits, so
		// a lost reply is not an unknown outcome of the guard's statement:
		// the caller's COMMIT, which cannot succeed now, decides.
		e := newOutcomeEnv(t)
		tx, err := e.conn.Begin(ctx)
		require.NoError(t, err)
		e.proxy.arm(cutAfterReply)
		err = e.g.Write(ctx, tx, counterKey, holder(3), increment(0, nil, 3))
		e.proxy.requireFired(t)
		requireNotApplied(t, e, err)
		require.Error(t, tx.Commit(ctx))
		requireNotApplied(t, e, err)
	})
}

// The catch-all: a deadline that ends while the statement runs on the
// server. The server may finish it, so the outcome is unknown, and the
// cause still matches context.DeadlineExceeded.
func TestDeadlineMidStatementIsUnknown(t *testing.T) {
	e := newOutcomeEnv(t)
	ctx := context.Background()
	// Hold the row lock so the guarded UPDATE waits on the server.
	blocker, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback(ctx) }()
	_, err = blocker.Exec(ctx, `SELECT 1 FROM counters WHERE name = $1 FOR UPDATE`, counterKey)
	require.NoError(t, err)

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	err = e.g.Write(short, e.conn, counterKey, holder(4), increment(0, nil, 4))
	requireUnknown(t, err, "Write", 4)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.True(t, pgconn.Timeout(err))
}
