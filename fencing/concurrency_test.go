package fencing_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/fencing"
)

// Many holders with increasing tokens hammer one counter at once, as if
// leases kept expiring under them. Whatever the interleaving: the counter
// equals the number of accepted writes (no lost update), and the history of
// accepted tokens is strictly increasing (no token accepted after a larger
// one).
func TestConcurrentHolders(t *testing.T) {
	const (
		workers  = 8
		attempts = 25
	)
	tests := []struct {
		name      string
		increment func(ctx context.Context, t *testing.T, db *pgxpool.Pool) func(context.Context, holder) error
	}{
		{"claim-first", func(ctx context.Context, t *testing.T, db *pgxpool.Pool) func(context.Context, holder) error {
			g := guardCounter(t, db)
			return func(ctx context.Context, h holder) error {
				return g.Update(ctx, db, counterKey, h, func(ctx context.Context) (fencing.Values, error) {
					n, hist, err := loadCounter(ctx, db)
					pause() // widen the window between read and write
					return increment(n, hist, h), err
				})
			}
		}},
		{"fence-table", func(ctx context.Context, t *testing.T, db *pgxpool.Pool) func(context.Context, holder) error {
			f := setupFenceTable(t, db)
			return func(ctx context.Context, h holder) error {
				return f.InTx(ctx, db, counterKey, h, func(ctx context.Context, tx pgx.Tx) error {
					pause()
					return incrementTx(ctx, tx, h)
				})
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db := newPool(t)
			setupCounter(t, db)
			inc := tc.increment(ctx, t, db)

			var (
				next               atomic.Uint64 // the "lock service": tokens in grant order
				accepted, rejected atomic.Int64
				mu                 sync.Mutex
				errs               []error
				wg                 sync.WaitGroup
			)
			for range workers {
				wg.Go(func() {
					for range attempts {
						err := inc(ctx, holder(next.Add(1)))
						switch {
						case err == nil:
							accepted.Add(1)
						case errors.Is(err, fencing.ErrStaleToken):
							rejected.Add(1)
						default:
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
					}
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))

			n, hist := readCounter(t, db)
			t.Logf("accepted %d, rejected %d", accepted.Load(), rejected.Load())
			require.Positive(t, accepted.Load())
			require.Equal(t, int64(workers*attempts), accepted.Load()+rejected.Load())
			require.Equal(t, accepted.Load(), n, "counter vs accepted writes")
			require.Len(t, hist, int(n))
			for i := 1; i < len(hist); i++ {
				require.Less(t, hist[i-1], hist[i], "token %d accepted after %d", hist[i], hist[i-1])
			}
		})
	}
}

// pause sleeps up to 2ms so critical sections overlap.
func pause() { time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) }
