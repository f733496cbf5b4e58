package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// advisoryService takes a PostgreSQL advisory lock inside the section's
// transaction, on the database that holds the counter: the lock is taken
// with pg_advisory_xact_lock (or, for a polling worker,
// pg_try_advisory_xact_lock) and ends with the transaction, at COMMIT,
// ROLLBACK or when the server sees the connection die. It has no TTL and
// no token: the server itself keeps a stalled holder's lock, for as long
// as the holder's connection lives.
type advisoryService struct {
	key int64
}

func newAdvisoryService(cfg workerConfig) (*advisoryService, error) {
	if cfg.Fencing != "none" {
		return nil, fmt.Errorf("chaos worker: an advisory lock has no fencing token (fencing %q)", cfg.Fencing)
	}
	return &advisoryService{key: advisoryKey(cfg.Key)}, nil
}

// advisoryKey is the bigint the advisory lock of key is taken on: the
// 64-bit FNV-1a hash of key's UTF-8 bytes, read as a two's-complement
// signed integer. Every process that locks key must use this mapping;
// it is short enough to write again in any language (offset basis
// 14695981039346656037, prime 1099511628211, xor then multiply per byte).
// Two keys that collide share one lock, which costs throughput, never
// safety.
func advisoryKey(key string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int64(h.Sum64())
}

func (a *advisoryService) close()              {}
func (a *advisoryService) recordsItself() bool { return true }

// attempt runs the whole section in one transaction: lock, read, work,
// write, and the section's row, committed together. A section whose
// transaction did not commit left nothing, not even its row; the lock
// was let go with it.
func (a *advisoryService) attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error) {
	lctx, cancel := context.WithTimeout(ctx, time.Duration(w.cfg.LockMs)*time.Millisecond)
	defer cancel()
	tx, err := w.pool.Begin(lctx)
	if err != nil {
		// The database is down: do not spin on it.
		_ = sleep(ctx, 20*time.Millisecond)
		return outcomeNotLocked, err
	}
	rollback := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	if err := a.lock(lctx, w, tx); err != nil {
		rollback()
		return outcomeNotLocked, err
	}
	return inTransaction(ctx, w, s, tx)
}

// lock waits in pg_advisory_xact_lock until ctx ends (pgx then cancels
// the statement), or, for a polling worker, asks pg_try_advisory_xact_lock
// and sleeps after each refusal.
func (a *advisoryService) lock(ctx context.Context, w *worker, tx pgx.Tx) error {
	if w.cfg.PollMs <= 0 {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, a.key)
		return err
	}
	for {
		var ok bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, a.key).Scan(&ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		w.polls++
		if err := sleep(ctx, time.Duration(w.cfg.PollMs)*time.Millisecond); err != nil {
			return errors.Join(errors.New("advisory lock not obtained"), err)
		}
	}
}

// inTransaction runs a section whose lock the transaction tx holds (an
// advisory lock taken in it, or the row locked FOR UPDATE): read, work,
// write and record in tx, and release the lock by committing. The lock is
// valid exactly while the transaction holds it, so the section's deadline
// is its end; its release is the COMMIT, which the row cannot wait for,
// so it is recorded as the end too.
func inTransaction(ctx context.Context, w *worker, s *section, tx pgx.Tx) (attemptOutcome, error) {
	rollback := func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }
	s.gotNs = stampNs()
	if err := w.gate(ctx, gateLocked, s.attempt, 0); err != nil {
		rollback()
		return outcomeStopped, err
	}
	if err := readCounter(ctx, tx, w.cfg.row(), s); err != nil {
		rollback()
		return outcomeError, err
	}
	if err := w.gate(ctx, gateRead, s.attempt, 0); err != nil {
		rollback()
		return outcomeError, err
	}
	_ = w.work(ctx, nil) // no lease to extend: the transaction holds the lock
	if _, err := tx.Exec(ctx, `UPDATE counter SET value = $1 WHERE id = $2`, s.read+1, w.cfg.row()); err != nil {
		rollback()
		return outcomeError, err
	}
	s.endNs = stampNs()
	s.deadlineNs, s.releaseNs, s.outcome = s.endNs, s.endNs, outcomeOK
	if err := w.record(ctx, tx, s); err != nil {
		rollback()
		return outcomeError, err
	}
	if err := tx.Commit(context.WithoutCancel(ctx)); err != nil {
		return outcomeError, err
	}
	return outcomeOK, nil
}
