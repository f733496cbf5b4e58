package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// rowService locks the protected row itself: the section's transaction
// takes SELECT ... FOR UPDATE on the counter row it then writes (or, for
// a polling worker, FOR UPDATE NOWAIT, and a new transaction after each
// refusal). The lock ends with the transaction, at COMMIT, ROLLBACK or
// when the server sees the connection die. Like the advisory lock it has
// no TTL and no token; unlike it, it cannot be held by anything but the
// transaction that writes the row, so a write can never come from a
// holder that lost the lock.
type rowService struct{}

func newRowService(cfg workerConfig) (*rowService, error) {
	if cfg.Fencing != "none" {
		return nil, fmt.Errorf("chaos worker: a row lock has no fencing token (fencing %q)", cfg.Fencing)
	}
	return &rowService{}, nil
}

func (r *rowService) close()              {}
func (r *rowService) recordsItself() bool { return true }

// attempt runs the whole section in one transaction: lock the row, read
// it, work, write it, and the section's row, committed together.
func (r *rowService) attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error) {
	lctx, cancel := context.WithTimeout(ctx, time.Duration(w.cfg.LockMs)*time.Millisecond)
	defer cancel()
	tx, err := r.lock(lctx, w)
	if err != nil {
		return outcomeNotLocked, err
	}
	return inTransaction(ctx, w, s, tx)
}

// lock begins the section's transaction and locks the row in it, waiting
// until ctx ends (pgx then cancels the statement); a polling worker asks
// with NOWAIT, which aborts the transaction when the row is locked, so it
// rolls back, sleeps and begins again.
func (r *rowService) lock(ctx context.Context, w *worker) (pgx.Tx, error) {
	q := `SELECT 1 FROM counter WHERE id = $1 FOR UPDATE`
	if w.cfg.PollMs > 0 {
		q += ` NOWAIT`
	}
	for {
		tx, err := w.pool.Begin(ctx)
		if err != nil {
			// The database is down: do not spin on it.
			_ = sleep(ctx, 20*time.Millisecond)
			return nil, err
		}
		var one int
		err = tx.QueryRow(ctx, q, w.cfg.row()).Scan(&one)
		if err == nil {
			return tx, nil
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		var pe *pgconn.PgError
		if w.cfg.PollMs <= 0 || !errors.As(err, &pe) || pe.Code != "55P03" { // lock_not_available
			return nil, err
		}
		w.polls++
		if err := sleep(ctx, time.Duration(w.cfg.PollMs)*time.Millisecond); err != nil {
			return nil, errors.Join(errors.New("row lock not obtained"), err)
		}
	}
}
