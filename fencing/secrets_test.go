package fencing_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// The package never sees a DSN (it takes a DB), and its errors wrap the
// driver's: when PostgreSQL cannot be reached, no error of Guard or
// FenceTable carries the password of the DSN the pool was built from.
// (Issue 36.)
func TestSecrets_ErrorsDoNotCarryTheDSNsPassword(t *testing.T) {
	const pw = "Fencing-Distinctive-Pw-51c2"
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	pool, err := pgxpool.New(context.Background(), "postgres://app:"+pw+"@"+addr+"/app?connect_timeout=2&sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	g, err := fencing.NewGuard(fencing.GuardConfig{Table: "counters", KeyColumn: "name", FenceColumn: "fence"})
	require.NoError(t, err)
	ft, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	require.NoError(t, err)
	_, fenceErr := g.Fence(ctx, pool, "c")
	for name, err := range map[string]error{
		"Guard.Setup":      g.Setup(ctx, pool),
		"Guard.Write":      g.Write(ctx, pool, "c", holder(7), fencing.Values{"n": 1}),
		"Guard.Claim":      g.Claim(ctx, pool, "c", holder(7)),
		"Guard.Fence":      fenceErr,
		"FenceTable.Setup": ft.Setup(ctx, pool),
		"FenceTable.InTx": ft.InTx(ctx, pool, "r", holder(7), func(context.Context, pgx.Tx) error {
			return nil
		}),
	} {
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), pw, "%s: the error shows the DSN's password", name)
		require.True(t, strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "connect"),
			"%s: the error does not say what failed: %v", name, err)
	}
}
