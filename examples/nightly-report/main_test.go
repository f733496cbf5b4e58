package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }

// The README's example, run as written against five real redis-server
// nodes and PostgreSQL: on a new deployment and a new database, and again
// on the same ones, as a second start of the service.
func TestReadmeExampleWritesTheReportFenced(t *testing.T) {
	var addrs []string
	for _, nd := range testenv.RedisNodes(t, 5) {
		addrs = append(addrs, nd.Addr())
	}
	dsn := testenv.Postgres(t).NewDatabase(t)
	t.Setenv("QUORUMLOCK_NODES", strings.Join(addrs, ","))
	t.Setenv("DATABASE_URL", dsn)
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
