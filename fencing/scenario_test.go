package fencing_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// The two scenarios of Kleppmann's "How to do distributed locking", played
// step by step with fake holders so every interleaving is deterministic.
// Holder A got token 33, then paused past its lease; holder B got 34.

const (
	tokA      = holder(33)
	tokB      = holder(34)
	tokARetry = holder(35) // A's fresh lease after its refusal
)

// Scenario 1: A pauses before writing, B takes over and writes, A wakes up
// and writes. Every mode must refuse A and keep B's value.
func TestPausedHolderIsRefused(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, db *pgxpool.Pool)
	}{
		{"write-only", func(t *testing.T, db *pgxpool.Pool) {
			g := guardCounter(t, db)
			nA, histA := readCounter(t, db) // A reads, then pauses
			nB, histB := readCounter(t, db)
			require.NoError(t, g.Write(ctx, db, counterKey, tokB, increment(nB, histB, tokB)))
			err := g.Write(ctx, db, counterKey, tokA, increment(nA, histA, tokA))
			requireStale(t, err, 33, 34)
		}},
		{"claim-first", func(t *testing.T, db *pgxpool.Pool) {
			g := guardCounter(t, db)
			require.NoError(t, g.Claim(ctx, db, counterKey, tokA))
			nA, histA := readCounter(t, db) // A claims and reads, then pauses
			require.NoError(t, claimFirstIncrement(ctx, g, db, tokB))
			err := g.WriteClaimed(ctx, db, counterKey, tokA, increment(nA, histA, tokA))
			requireStale(t, err, 33, 34)
		}},
		{"fence-table", func(t *testing.T, db *pgxpool.Pool) {
			f := setupFenceTable(t, db)
			// A pauses between getting its lease and opening its transaction
			// (a pause inside the transaction would hold B off instead).
			require.NoError(t, f.InTx(ctx, db, counterKey, tokB, func(ctx context.Context, tx pgx.Tx) error {
				return incrementTx(ctx, tx, tokB)
			}))
			called := false
			err := f.InTx(ctx, db, counterKey, tokA, func(ctx context.Context, tx pgx.Tx) error {
				called = true
				return incrementTx(ctx, tx, tokA)
			})
			requireStale(t, err, 33, 34)
			require.False(t, called, "fn ran for a stale holder")
			got, err := f.Token(ctx, db, counterKey)
			require.NoError(t, err)
			require.Equal(t, uint64(34), got)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newPool(t)
			setupCounter(t, db)
			tc.run(t, db)
			n, hist := readCounter(t, db)
			require.Equal(t, int64(1), n)
			require.Equal(t, []int64{34}, hist, "only B's write may be committed")
		})
	}
}

// Scenario 2: A and B overlap. A reads, B reads, then both write. The
// counter starts at 0 and every accepted write is one increment, so the
// counter must equal the number of accepted writes; the difference is the
// number of lost updates.
func TestOverlappingHolders(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		run      func(t *testing.T, db *pgxpool.Pool) (accepted int)
		wantLost int64
		wantHist []int64
	}{
		{
			// The documented limit of write-only fencing: A's write comes
			// first and passes (fence 0 < 33), B's passes too (33 < 34), and
			// both computed 0+1 from the same read.
			name: "write-only/A writes first: one update lost",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				g := guardCounter(t, db)
				nA, histA := readCounter(t, db)
				nB, histB := readCounter(t, db)
				require.NoError(t, g.Write(ctx, db, counterKey, tokA, increment(nA, histA, tokA)))
				require.NoError(t, g.Write(ctx, db, counterKey, tokB, increment(nB, histB, tokB)))
				return 2
			},
			wantLost: 1,
			wantHist: []int64{34},
		},
		{
			// Same reads, other write order: now write-only refuses A, and
			// A's retry with a fresh lease loses nothing.
			name: "write-only/B writes first: A refused and retried",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				g := guardCounter(t, db)
				nA, histA := readCounter(t, db)
				nB, histB := readCounter(t, db)
				require.NoError(t, g.Write(ctx, db, counterKey, tokB, increment(nB, histB, tokB)))
				requireStale(t, g.Write(ctx, db, counterKey, tokA, increment(nA, histA, tokA)), 33, 34)
				n, hist := readCounter(t, db)
				require.NoError(t, g.Write(ctx, db, counterKey, tokARetry, increment(n, hist, tokARetry)))
				return 2
			},
			wantHist: []int64{34, 35},
		},
		{
			// The interleaving that lost an update above. B's claim replaces
			// A's stamp, so A's write is refused even though it comes first.
			name: "claim-first/A writes first: A refused and retried",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				g := guardCounter(t, db)
				require.NoError(t, g.Claim(ctx, db, counterKey, tokA))
				nA, histA := readCounter(t, db)
				require.NoError(t, g.Claim(ctx, db, counterKey, tokB))
				nB, histB := readCounter(t, db)
				requireStale(t, g.WriteClaimed(ctx, db, counterKey, tokA, increment(nA, histA, tokA)), 33, 34)
				require.NoError(t, g.WriteClaimed(ctx, db, counterKey, tokB, increment(nB, histB, tokB)))
				require.NoError(t, claimFirstIncrement(ctx, g, db, tokARetry))
				return 2
			},
			wantHist: []int64{34, 35},
		},
		{
			name: "claim-first/B writes first: A refused and retried",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				g := guardCounter(t, db)
				require.NoError(t, g.Claim(ctx, db, counterKey, tokA))
				nA, histA := readCounter(t, db)
				require.NoError(t, g.Claim(ctx, db, counterKey, tokB))
				nB, histB := readCounter(t, db)
				require.NoError(t, g.WriteClaimed(ctx, db, counterKey, tokB, increment(nB, histB, tokB)))
				requireStale(t, g.WriteClaimed(ctx, db, counterKey, tokA, increment(nA, histA, tokA)), 33, 34)
				require.NoError(t, claimFirstIncrement(ctx, g, db, tokARetry))
				return 2
			},
			wantHist: []int64{34, 35},
		},
		{
			// A claims and reads inside its transaction; B's claim blocks
			// on the fence row until A commits, then reads A's value.
			name: "fence-table/A first: B waits for A",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				f := setupFenceTable(t, db)
				// A is paused between its read and its write.
				release, doneA := pausedIncrement(t, f, db, tokA)
				doneB := make(chan error, 1)
				go func() {
					doneB <- f.InTx(ctx, db, counterKey, tokB, func(ctx context.Context, tx pgx.Tx) error {
						return incrementTx(ctx, tx, tokB)
					})
				}()
				waitForLockWaiters(t, db, 1)
				close(release)
				require.NoError(t, <-doneA)
				require.NoError(t, <-doneB)
				return 2
			},
			wantHist: []int64{33, 34},
		},
		{
			// B claims and reads first; A, late, blocks on the fence row,
			// then is refused when B commits, and retries.
			name: "fence-table/B first: A waits, is refused and retried",
			run: func(t *testing.T, db *pgxpool.Pool) int {
				f := setupFenceTable(t, db)
				release, doneB := pausedIncrement(t, f, db, tokB)
				doneA := make(chan error, 1)
				calledA := make(chan struct{}, 1)
				go func() {
					doneA <- f.InTx(ctx, db, counterKey, tokA, func(ctx context.Context, tx pgx.Tx) error {
						calledA <- struct{}{}
						return incrementTx(ctx, tx, tokA)
					})
				}()
				waitForLockWaiters(t, db, 1)
				close(release)
				require.NoError(t, <-doneB)
				requireStale(t, <-doneA, 33, 34)
				require.Empty(t, calledA, "fn ran for a stale holder")
				require.NoError(t, f.InTx(ctx, db, counterKey, tokARetry, func(ctx context.Context, tx pgx.Tx) error {
					return incrementTx(ctx, tx, tokARetry)
				}))
				return 2
			},
			wantHist: []int64{34, 35},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newPool(t)
			setupCounter(t, db)
			accepted := tc.run(t, db)
			n, hist := readCounter(t, db)
			require.Equal(t, tc.wantLost, int64(accepted)-n, "lost updates")
			require.Equal(t, tc.wantHist, hist)
		})
	}
}

// The claim-first steps also work through one connection and inside a
// caller's transaction; this pins the DB interface to all three pgx types.
func TestDBKinds(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		db   func(t *testing.T, pool *pgxpool.Pool) fencing.DB
	}{
		{"pool", func(t *testing.T, pool *pgxpool.Pool) fencing.DB { return pool }},
		{"conn", func(t *testing.T, pool *pgxpool.Pool) fencing.DB {
			conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig)
			require.NoError(t, err)
			t.Cleanup(func() { _ = conn.Close(context.Background()) })
			return conn
		}},
		{"tx", func(t *testing.T, pool *pgxpool.Pool) fencing.DB {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
			return tx
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pool := newPool(t)
			setupCounter(t, pool)
			g := guardCounter(t, pool)
			f := setupFenceTable(t, pool)
			db := tc.db(t, pool)

			require.NoError(t, g.Write(ctx, db, counterKey, holder(1), fencing.Values{"n": 1}))
			require.NoError(t, claimFirstIncrement(ctx, g, db, holder(2)))
			require.NoError(t, f.InTx(ctx, db, counterKey, holder(3), func(ctx context.Context, tx pgx.Tx) error {
				return incrementTx(ctx, tx, holder(3))
			}))
			requireStale(t, f.InTx(ctx, db, counterKey, holder(3), func(ctx context.Context, tx pgx.Tx) error {
				return incrementTx(ctx, tx, holder(3))
			}), 3, 3)
			requireStale(t, g.Write(ctx, db, counterKey, holder(2), fencing.Values{"n": 99}), 2, 2)

			// A refused savepoint leaves a caller's transaction usable.
			n, hist := readCounter(t, db)
			require.Equal(t, int64(3), n)
			require.Equal(t, []int64{2, 3}, hist)
			fence, err := g.Fence(ctx, db, counterKey)
			require.NoError(t, err)
			require.Equal(t, uint64(2), fence)
		})
	}
}

// pausedIncrement starts an increment of the counter in f.InTx under tok
// and returns once it has read the counter; it writes when release is
// closed, and its InTx result arrives on done.
func pausedIncrement(t *testing.T, f *fencing.FenceTable, db *pgxpool.Pool, tok fencing.Holder) (release chan struct{}, done <-chan error) {
	t.Helper()
	read := make(chan struct{})
	release = make(chan struct{})
	d := make(chan error, 1)
	go func() {
		d <- f.InTx(context.Background(), db, counterKey, tok, func(ctx context.Context, tx pgx.Tx) error {
			n, hist, err := loadCounter(ctx, tx)
			if err != nil {
				return err
			}
			close(read)
			<-release
			_, err = tx.Exec(ctx, `UPDATE counters SET n = $1, history = $2 WHERE name = $3`,
				n+1, append(hist, int64(tok.FencingToken())), counterKey)
			return err
		})
	}()
	select {
	case <-read:
	case err := <-d:
		t.Fatalf("InTx for token %d ended before its read: %v", tok.FencingToken(), err)
	}
	return release, d
}
