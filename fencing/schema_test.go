package fencing_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// tableShape describes a table's columns, constraints, indexes and rows, so
// a test can show that a refused Setup changed none of them.
func tableShape(t *testing.T, db querier, table string) string {
	t.Helper()
	quoted := pgx.Identifier{table}.Sanitize()
	var shape string
	require.NoError(t, db.QueryRow(context.Background(), `SELECT
		(SELECT string_agg(format('%s %s %s %s', attname, format_type(atttypid, atttypmod), attnotnull,
			pg_get_expr(d.adbin, d.adrelid)), ', ' ORDER BY attnum)
		 FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		 WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped)
		|| ' | ' || coalesce((SELECT string_agg(pg_get_indexdef(indexrelid), ', ' ORDER BY indexrelid)
		 FROM pg_index WHERE indrelid = to_regclass($1)), '')
		|| ' | ' || (SELECT count(*) FROM pg_constraint WHERE conrelid = to_regclass($1))`, quoted).Scan(&shape))
	var rows string
	require.NoError(t, db.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(r::text, ',' ORDER BY r::text), '') FROM `+quoted+` r`).Scan(&rows))
	return shape + " | " + rows
}

func newGuard(t *testing.T, cfg fencing.GuardConfig) *fencing.Guard {
	t.Helper()
	g, err := fencing.NewGuard(cfg)
	require.NoError(t, err)
	return g
}

func TestGuardSetupChecksAnExistingFence(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)

	refused := []struct {
		name, column, found string
	}{
		{"integer", "fence integer NOT NULL DEFAULT 0", "integer"},
		{"text", "fence text NOT NULL DEFAULT '0'", "text"},
		{"numeric", "fence numeric(20,0) NOT NULL DEFAULT 0", "numeric(20,0)"},
		{"smallint", "fence smallint NOT NULL DEFAULT 0", "smallint"},
		{"nullable bigint", "fence bigint", "nullable"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			raw := "t " + tc.name // a quoted name: the check must quote it too
			table := pgx.Identifier{raw}.Sanitize()
			_, err := db.Exec(ctx, `CREATE TABLE `+table+` (id text PRIMARY KEY, n int, `+tc.column+`)`)
			require.NoError(t, err)
			_, err = db.Exec(ctx, `INSERT INTO `+table+` (id, n, fence) VALUES ('r', 1, 9)`)
			require.NoError(t, err)
			before := tableShape(t, db, raw)

			g := newGuard(t, fencing.GuardConfig{Table: raw, KeyColumn: "id", FenceColumn: "fence"})
			err = g.Setup(ctx, db)
			require.ErrorIs(t, err, fencing.ErrSchemaMismatch)
			require.ErrorContains(t, err, `table public."`+raw+`" column "fence"`)
			require.ErrorContains(t, err, tc.found)
			require.ErrorContains(t, err, "nothing was changed")
			require.Equal(t, before, tableShape(t, db, raw), "Setup changed the table")
		})
	}

	t.Run("bigint NOT NULL is kept as it is", func(t *testing.T) {
		_, err := db.Exec(ctx, `CREATE TABLE ok (id text PRIMARY KEY, n int, fence bigint NOT NULL);
			INSERT INTO ok VALUES ('r', 1, 9)`)
		require.NoError(t, err)
		before := tableShape(t, db, "ok")
		g := newGuard(t, fencing.GuardConfig{Table: "ok", KeyColumn: "id", FenceColumn: "fence"})
		require.NoError(t, g.Setup(ctx, db))
		require.Equal(t, before, tableShape(t, db, "ok"))
		requireStale(t, g.Write(ctx, db, "r", holder(9), fencing.Values{"n": 2}), 9, 9)
		require.NoError(t, g.Write(ctx, db, "r", holder(10), fencing.Values{"n": 2}))
	})

	t.Run("a missing column is added", func(t *testing.T) {
		_, err := db.Exec(ctx, `CREATE TABLE bare (id text PRIMARY KEY, n int); INSERT INTO bare VALUES ('r', 1)`)
		require.NoError(t, err)
		g := newGuard(t, fencing.GuardConfig{Table: "bare", KeyColumn: "id", FenceColumn: "fence"})
		require.NoError(t, g.Setup(ctx, db))
		require.Contains(t, tableShape(t, db, "bare"), "fence bigint t 0")
		got, err := g.Fence(ctx, db, "r")
		require.NoError(t, err)
		require.Zero(t, got, "existing rows start at 0")
		require.NoError(t, g.Setup(ctx, db), "and Setup stays idempotent")
	})
}

// The fence column is looked up where the guarded statements will find the
// table: in the configured schema, or else on the session's search_path.
func TestGuardSetupFollowsTheSchema(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	_, err := db.Exec(ctx, `CREATE SCHEMA s1;
		CREATE TABLE s1.t (id text PRIMARY KEY, fence integer NOT NULL DEFAULT 0);
		CREATE TABLE public.t (id text PRIMARY KEY, fence bigint NOT NULL DEFAULT 0)`)
	require.NoError(t, err)

	inS1 := newGuard(t, fencing.GuardConfig{Schema: "s1", Table: "t", KeyColumn: "id", FenceColumn: "fence"})
	err = inS1.Setup(ctx, db)
	require.ErrorIs(t, err, fencing.ErrSchemaMismatch)
	require.ErrorContains(t, err, `table s1.t column "fence" has type integer`)

	onPath := newGuard(t, fencing.GuardConfig{Table: "t", KeyColumn: "id", FenceColumn: "fence"})
	require.NoError(t, onPath.Setup(ctx, db), "public.t is first on the default search_path")

	conn, err := db.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `SET search_path TO s1, public`)
	require.NoError(t, err)
	err = onPath.Setup(ctx, conn)
	require.ErrorIs(t, err, fencing.ErrSchemaMismatch)
	require.ErrorContains(t, err, `table s1.t column "fence" has type integer`)
	_, err = conn.Exec(ctx, `RESET search_path`)
	require.NoError(t, err)
}

// A column of the wrong type that appears between Setup's first look and
// its ALTER (which then skips it) is caught by the second look, made under
// the ALTER's lock.
func TestGuardSetupRecheckUnderTheLock(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)
	_, err := db.Exec(ctx, `CREATE TABLE racy (id text PRIMARY KEY)`)
	require.NoError(t, err)

	other, err := db.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	_, err = other.Exec(ctx, `ALTER TABLE racy ADD COLUMN fence integer NOT NULL DEFAULT 0`)
	require.NoError(t, err)

	g := newGuard(t, fencing.GuardConfig{Table: "racy", KeyColumn: "id", FenceColumn: "fence"})
	done := make(chan error, 1)
	go func() { done <- g.Setup(ctx, db) }()
	// Setup saw no column (the other ALTER is uncommitted) and now waits
	// for that ALTER's lock.
	waitForLockWaiters(t, db, 1)
	require.NoError(t, other.Commit(ctx))

	err = <-done
	require.ErrorIs(t, err, fencing.ErrSchemaMismatch)
	require.ErrorContains(t, err, "has type integer")
	require.Contains(t, tableShape(t, db, "racy"), "fence integer t 0")
}

func TestFenceTableSetupChecksAnExistingTable(t *testing.T) {
	ctx := context.Background()
	db := newPool(t)

	refused := []struct {
		name, ddl, want string
	}{
		{"integer token", `(resource text PRIMARY KEY, token integer NOT NULL)`, `column "token" has type integer`},
		{"text token", `(resource text PRIMARY KEY, token text NOT NULL)`, `column "token" has type text`},
		{"numeric token", `(resource text PRIMARY KEY, token numeric NOT NULL)`, `column "token" has type numeric`},
		{"nullable token", `(resource text PRIMARY KEY, token bigint)`, `column "token" is bigint but nullable`},
		{"no token", `(resource text PRIMARY KEY, n bigint NOT NULL)`, `column "token" is missing`},
		{"no resource", `(name text PRIMARY KEY, token bigint NOT NULL)`, `column "resource" is missing`},
		{"integer resource", `(resource int PRIMARY KEY, token bigint NOT NULL)`, `column "resource" is of type integer`},
		{"resource not unique", `(resource text NOT NULL, token bigint NOT NULL)`, `no unique, non-deferrable index`},
		{"deferrable key", `(resource text, token bigint NOT NULL, UNIQUE (resource) DEFERRABLE)`, `no unique, non-deferrable index`},
		{"key of two columns", `(resource text, token bigint NOT NULL, PRIMARY KEY (resource, token))`, `no unique, non-deferrable index`},
	}
	for i, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			table := "fences_" + string(rune('a'+i))
			_, err := db.Exec(ctx, `CREATE TABLE `+table+` `+tc.ddl)
			require.NoError(t, err)
			before := tableShape(t, db, table)
			f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: table})
			require.NoError(t, err)
			err = f.Setup(ctx, db)
			require.ErrorIs(t, err, fencing.ErrSchemaMismatch)
			require.ErrorContains(t, err, "table public."+table)
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, before, tableShape(t, db, table), "Setup changed the table")
		})
	}

	t.Run("a compatible table is used as it is", func(t *testing.T) {
		_, err := db.Exec(ctx, `CREATE TABLE fences_ok (resource varchar(200) PRIMARY KEY, token bigint NOT NULL)`)
		require.NoError(t, err)
		before := tableShape(t, db, "fences_ok")
		f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: "fences_ok"})
		require.NoError(t, err)
		require.NoError(t, f.Setup(ctx, db))
		require.Equal(t, before, tableShape(t, db, "fences_ok"))
		require.NoError(t, f.InTx(ctx, db, "r", holder(10), func(context.Context, pgx.Tx) error { return nil }))
		requireStale(t, f.InTx(ctx, db, "r", holder(9), func(context.Context, pgx.Tx) error { return nil }), 9, 10)
	})
}
