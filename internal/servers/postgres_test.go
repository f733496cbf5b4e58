package servers_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestPostgresProcessKillRestartKeepsData(t *testing.T) {
	if testing.Short() {
		t.Skip("runs its own initdb; skipped in -short mode")
	}
	t.Parallel()
	testenv.RequireBinaries(t, "initdb", "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := servers.StartPostgresProcess(ctx, servers.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })

	require.NoError(t, p.CreateDatabase(ctx, "app"))
	require.Error(t, p.CreateDatabase(ctx, "app"), "creating an existing database must fail")
	conn, err := pgx.Connect(ctx, p.DSN("app"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')`)
	require.NoError(t, err)
	oldPID, addr := p.PID(), p.Addr()

	require.NoError(t, p.Kill())
	require.Error(t, conn.Ping(ctx), "a killed server must drop its sessions")
	_ = conn.Close(ctx)

	require.NoError(t, p.Restart(ctx))
	require.Equal(t, addr, p.Addr())
	require.NotEqual(t, oldPID, p.PID())
	conn, err = pgx.Connect(ctx, p.DSN("app"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var v string
	require.NoError(t, conn.QueryRow(ctx, `SELECT v FROM t`).Scan(&v))
	require.Equal(t, "kept", v)
}
