package fencing

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exec runs one guarded UPDATE (op names it in errors; claimed says whether
// it requires the fence to equal the token) and explains a failure: a
// refusal, a driver error that proves nothing was committed, or an
// *OutcomeUnknownError.
func (g *Guard) exec(ctx context.Context, db DB, op string, key any, token int64, claimed bool, sql string, args ...any) error {
	db, release, err := pin(ctx, db)
	if err != nil {
		return fmt.Errorf("fencing: %s %s key %v: get a connection: %w", op, g.name, key, err)
	}
	defer release()
	tag, err := db.Exec(ctx, sql, args...)
	switch {
	case err != nil && !isTx(db) && !notApplied(err):
		return &OutcomeUnknownError{Op: op, Resource: g.resource(key), Token: uint64(token), Err: err}
	case err != nil:
		return fmt.Errorf("fencing: %s %s key %v: %w", op, g.name, key, err)
	case tag.RowsAffected() == 0:
		return g.refused(ctx, db, key, token, claimed)
	}
	return nil
}

// pin takes one connection from a pool for a statement and its diagnosis.
// Pool.Exec would acquire it too, but then a failure to acquire (a closed
// pool, a connection that cannot be made, ctx ending while every
// connection is busy) comes back as a bare ctx.Err() or a dial error, the
// same as a context that ended or a socket that broke mid-request; with the
// acquisition apart, only errors of the statement itself can be unknown.
func pin(ctx context.Context, db DB) (DB, func(), error) {
	pool, ok := db.(*pgxpool.Pool)
	if !ok {
		return db, func() {}, nil
	}
	c, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, c.Release, nil
}

func (g *Guard) resource(key any) string { return fmt.Sprintf("%s key %v", g.name, key) }

// refused explains a guarded statement that matched no row: either the row
// is missing or its fence shows a newer (or equal) token. The read comes
// after the refusal, outside any atomicity; it is only a diagnosis, and
// fences never decrease, so it cannot report a fence smaller than the one
// that refused the write.
func (g *Guard) refused(ctx context.Context, db DB, key any, token int64, claimed bool) error {
	var cur int64
	err := db.QueryRow(ctx, g.fenceSQL, key).Scan(&cur)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %s key %v", ErrNoRow, g.name, key)
	case err != nil:
		return fmt.Errorf("fencing: %s key %v: write refused, then reading the fence failed: %w", g.name, key, err)
	case cur >= token:
		return &StaleTokenError{Resource: g.resource(key), Token: uint64(token), Current: uint64(cur)}
	case claimed:
		return fmt.Errorf("%w: %s key %v has fence %d, token is %d", ErrNotClaimed, g.name, key, cur, token)
	default:
		// Only a fence lowered outside this package gets here.
		return fmt.Errorf("fencing: %s key %v: write refused but fence %d is below token %d (was it lowered?)", g.name, key, cur, token)
	}
}
