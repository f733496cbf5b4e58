package fencing_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// untouchable is a DB that counts every call: bad input must be refused
// before the database is touched.
type untouchable struct{ calls atomic.Int64 }

func (u *untouchable) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	u.calls.Add(1)
	return pgconn.CommandTag{}, nil
}

func (u *untouchable) QueryRow(context.Context, string, ...any) pgx.Row {
	u.calls.Add(1)
	return nil
}

func (u *untouchable) Begin(context.Context) (pgx.Tx, error) {
	u.calls.Add(1)
	return nil, nil
}

func TestBadInputIsRefusedBeforeIO(t *testing.T) {
	ctx := context.Background()
	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "t", KeyColumn: "id", FenceColumn: "fence"})
	require.NoError(t, err)
	f, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: "fences"})
	require.NoError(t, err)
	vals := fencing.Values{"n": 1}
	noop := func(context.Context, pgx.Tx) error { return nil }
	noVals := func(context.Context) (fencing.Values, error) { return vals, nil }

	type op func(db fencing.DB, key string, h fencing.Holder) error
	ops := map[string]op{
		"Write": func(db fencing.DB, key string, h fencing.Holder) error {
			return g.Write(ctx, db, key, h, vals)
		},
		"Claim": func(db fencing.DB, key string, h fencing.Holder) error {
			return g.Claim(ctx, db, key, h)
		},
		"WriteClaimed": func(db fencing.DB, key string, h fencing.Holder) error {
			return g.WriteClaimed(ctx, db, key, h, vals)
		},
		"Update": func(db fencing.DB, key string, h fencing.Holder) error {
			return g.Update(ctx, db, key, h, noVals)
		},
		"InTx": func(db fencing.DB, key string, h fencing.Holder) error {
			return f.InTx(ctx, db, key, h, noop)
		},
	}
	tests := []struct {
		name string
		key  string
		h    fencing.Holder
		want error
	}{
		{"token 0", "r", holder(0), fencing.ErrNoToken},
		{"nil holder", "r", nil, fencing.ErrNoToken},
		{"token above MaxInt64", "r", holder(math.MaxInt64 + 1), fencing.ErrTokenRange},
		{"token MaxUint64", "r", holder(math.MaxUint64), fencing.ErrTokenRange},
		{"empty resource", "", holder(1), fencing.ErrEmptyResource},
	}
	for _, tc := range tests {
		for opName, run := range ops {
			t.Run(tc.name+"/"+opName, func(t *testing.T) {
				db := &untouchable{}
				err := run(db, tc.key, tc.h)
				require.ErrorIs(t, err, tc.want)
				require.NotErrorIs(t, err, fencing.ErrStaleToken)
				require.Zero(t, db.calls.Load(), "database touched")
			})
		}
	}

	t.Run("nil key", func(t *testing.T) {
		db := &untouchable{}
		require.ErrorIs(t, g.Write(ctx, db, nil, holder(1), vals), fencing.ErrEmptyResource)
		_, err := g.Fence(ctx, db, nil)
		require.ErrorIs(t, err, fencing.ErrEmptyResource)
		_, err = f.Token(ctx, db, "")
		require.ErrorIs(t, err, fencing.ErrEmptyResource)
		require.Zero(t, db.calls.Load())
	})

	t.Run("bad values", func(t *testing.T) {
		for name, v := range map[string]fencing.Values{
			"none":         {},
			"empty column": {"": 1},
			"fence column": {"fence": 1},
			"key column":   {"id": 1},
			"too long":     {strings.Repeat("x", 64): 1},
		} {
			t.Run(name, func(t *testing.T) {
				db := &untouchable{}
				require.Error(t, g.Write(ctx, db, "r", holder(1), v))
				require.Error(t, g.WriteClaimed(ctx, db, "r", holder(1), v))
				require.Zero(t, db.calls.Load())
			})
		}
	})

	t.Run("nil functions", func(t *testing.T) {
		db := &untouchable{}
		require.Error(t, f.InTx(ctx, db, "r", holder(1), nil))
		require.Error(t, g.Update(ctx, db, "r", holder(1), nil))
		require.Zero(t, db.calls.Load())
	})
}

func TestStaleTokenError(t *testing.T) {
	var err error = &fencing.StaleTokenError{Resource: "r", Token: 33, Current: 34}
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.NotErrorIs(t, err, fencing.ErrNoToken)
	require.Equal(t, "fencing: stale token 33 for r: fence is already 34", err.Error())
	require.NotErrorIs(t, err, fencing.ErrAlreadyWritten)
	err = &fencing.StaleTokenError{Resource: "r", Token: 34, Current: 34}
	require.ErrorIs(t, err, fencing.ErrStaleToken)
	require.ErrorIs(t, err, fencing.ErrAlreadyWritten)
}

func TestConfigValidation(t *testing.T) {
	long := strings.Repeat("a", 64)
	guards := []struct {
		name string
		cfg  fencing.GuardConfig
	}{
		{"empty table", fencing.GuardConfig{KeyColumn: "id", FenceColumn: "fence"}},
		{"empty key", fencing.GuardConfig{Table: "t", FenceColumn: "fence"}},
		{"empty fence", fencing.GuardConfig{Table: "t", KeyColumn: "id"}},
		{"key is fence", fencing.GuardConfig{Table: "t", KeyColumn: "x", FenceColumn: "x"}},
		{"long table", fencing.GuardConfig{Table: long, KeyColumn: "id", FenceColumn: "fence"}},
		{"long schema", fencing.GuardConfig{Schema: long, Table: "t", KeyColumn: "id", FenceColumn: "fence"}},
		{"NUL in column", fencing.GuardConfig{Table: "t", KeyColumn: "i\x00d", FenceColumn: "fence"}},
	}
	for _, tc := range guards {
		t.Run("guard/"+tc.name, func(t *testing.T) {
			g, err := fencing.NewGuard(tc.cfg)
			require.ErrorIs(t, err, fencing.ErrInvalidIdentifier)
			require.Nil(t, g)
		})
	}
	for name, cfg := range map[string]fencing.FenceTableConfig{
		"empty table": {Schema: "s"},
		"long table":  {Table: long},
		"NUL":         {Table: "a\x00b"},
	} {
		t.Run("fence table/"+name, func(t *testing.T) {
			f, err := fencing.NewFenceTable(cfg)
			require.ErrorIs(t, err, fencing.ErrInvalidIdentifier)
			require.Nil(t, f)
		})
	}
	// 63 bytes is PostgreSQL's limit, and allowed.
	_, err := fencing.NewGuard(fencing.GuardConfig{Table: long[:63], KeyColumn: "id", FenceColumn: "fence"})
	require.NoError(t, err)
}
