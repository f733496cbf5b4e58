package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }

// readmeEnv starts five new redis-server nodes and a new database and
// points the example's environment variables at them.
func readmeEnv(t *testing.T) ([]*testenv.RedisNode, string) {
	t.Helper()
	nodes := testenv.RedisNodes(t, 5)
	addrs := make([]string, len(nodes))
	for i, nd := range nodes {
		addrs[i] = nd.Addr()
	}
	dsn := testenv.Postgres(t).NewDatabase(t)
	t.Setenv("QUORUMLOCK_NODES", strings.Join(addrs, ","))
	t.Setenv("DATABASE_URL", dsn)
	return nodes, dsn
}

// The README's example, run as written against five real redis-server
// nodes and PostgreSQL: on a new deployment and a new database, and again
// on the same ones, as a second start of the service.
func TestReadmeExampleWritesTheReportFenced(t *testing.T) {
	_, dsn := readmeEnv(t)
	ctx := context.Background()

	row := func() (body string, fence int64) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		require.NoError(t, conn.QueryRow(ctx, `SELECT body, fence FROM reports WHERE name = 'nightly'`).Scan(&body, &fence))
		return body, fence
	}

	require.NoError(t, run(ctx))
	body, first := row()
	require.Equal(t, "all systems nominal", body)
	require.Positive(t, first, "the write carried the lease's fencing token")

	require.NoError(t, run(ctx), "a second start: Bootstrap admits nothing and the lock is granted again")
	_, second := row()
	require.Greater(t, second, first, "the later holder's token is larger")
}

// The README's promise, on its failure path: a newer holder's token has
// reached the row (here written into it, as a holder that got the lock
// while this one was paused would have), so the example's write is
// refused with ErrStaleToken, the row keeps the newer holder's work, and
// the lock is released all the same.
func TestReadmeExampleRefusesAStaleWrite(t *testing.T) {
	nodes, dsn := readmeEnv(t)
	ctx := context.Background()
	require.NoError(t, run(ctx))

	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	const newer = int64(1) << 62
	_, err = conn.Exec(ctx, `UPDATE reports SET body = 'the newer holder''s report', fence = $1 WHERE name = 'nightly'`, newer)
	require.NoError(t, err)

	err = run(ctx)
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.NotErrorIs(t, err, fencing.ErrAlreadyWritten, "a newer token, not this lease's own")
	var body string
	var fence int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT body, fence FROM reports WHERE name = 'nightly'`).Scan(&body, &fence))
	require.Equal(t, "the newer holder's report", body, "the stale write overwrote the newer holder's work")
	require.Equal(t, newer, fence)
	for _, nd := range nodes {
		n, err := nd.Client(t).Exists(ctx, "reports:nightly").Result()
		require.NoError(t, err)
		require.Zero(t, n, "node %s: the lock was not released after the refused write", nd.Addr())
	}
}
