package testenv_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestPostgresDatabaseIsUsableAndDropped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg := testenv.Postgres(t)

	var name string
	t.Run("a fresh database per call", func(t *testing.T) {
		dsn := pg.NewDatabase(t)
		other := pg.NewDatabase(t)
		require.NotEqual(t, dsn, other)
		name = dbName(t, dsn)

		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, `CREATE TABLE counter (id int PRIMARY KEY, n bigint NOT NULL)`)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, `INSERT INTO counter VALUES (1, 41)`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `UPDATE counter SET n = n + 1 WHERE id = 1 RETURNING n`).Scan(&n))
		require.Equal(t, int64(42), n)

		var db string
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
		require.Equal(t, name, db)
	})

	admin, err := pgx.Connect(ctx, pg.DSN("postgres"))
	require.NoError(t, err)
	defer admin.Close(ctx)
	var exists bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	require.False(t, exists, "the database must be dropped when its test ends")
}

func TestPostgresIsSharedAndListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := testenv.Postgres(t), testenv.Postgres(t)
	require.Equal(t, a.DSN("x"), b.DSN("x"), "one server per test binary")

	conn, err := pgx.Connect(ctx, a.DSN("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	for setting, want := range map[string]string{
		"listen_addresses": "127.0.0.1",
		"fsync":            "off",
	} {
		var got string
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting($1)`, setting).Scan(&got))
		require.Equal(t, want, got, setting)
	}
}

func TestPostgresDatabaseNameFitsIdentifierLimit(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	t.Run(strings.Repeat("a_very_long_subtest_name_", 5), func(t *testing.T) {
		name := dbName(t, pg.NewDatabase(t))
		require.LessOrEqual(t, len(name), 63)
		// PostgreSQL truncates a longer name without error, so this also
		// checks that the name asked for is the name that exists.
		conn, err := pgx.Connect(context.Background(), pg.DSN(name))
		require.NoError(t, err)
		require.NoError(t, conn.Close(context.Background()))
	})
}

func dbName(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	require.NotEmpty(t, name)
	return name
}
