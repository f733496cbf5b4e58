package fencing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// rollbackTimeout bounds the rollback that follows a failure. It runs on a
// context detached from the caller's, because the failure may well be the
// caller's cancellation.
const rollbackTimeout = 5 * time.Second

// FenceTableConfig names the table that stores one token per resource.
type FenceTableConfig struct {
	// Schema is optional; empty means the connection's search_path decides.
	Schema string
	// Table is required; DefaultFenceTable is a reasonable choice.
	Table string
}

// DefaultFenceTable is a conventional name for FenceTableConfig.Table.
const DefaultFenceTable = "fencing_tokens"

// FenceTable is the fence-table mode: a table of (resource, token) rows,
// separate from the data it protects, so it works for any schema without
// adding a column. InTx claims the resource's row at the start of a
// transaction and runs the caller's work in that same transaction.
//
// A FenceTable holds only SQL text: it is immutable and safe for concurrent
// use by any number of goroutines and databases.
type FenceTable struct {
	name     string // for messages
	table    string // quoted, maybe schema-qualified
	setupSQL string
	claimSQL string
	tokenSQL string
}

// NewFenceTable validates cfg and returns a FenceTable. It fails with
// ErrInvalidIdentifier when a name is empty (Table), longer than 63 bytes or
// contains a NUL byte. It does no I/O.
func NewFenceTable(cfg FenceTableConfig) (*FenceTable, error) {
	table, err := qualified(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	f := &FenceTable{
		name:  strings.TrimPrefix(cfg.Schema+"."+cfg.Table, "."),
		table: table,
	}
	f.setupSQL = fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))`, table)
	// ON CONFLICT DO UPDATE locks the existing row even when the WHERE
	// clause rejects the update, and a blocked claim re-checks the WHERE on
	// the version the lock holder committed (READ COMMITTED). So a claim
	// waits for the current holder's transaction, then passes only with a
	// strictly larger token. RETURNING yields no row when it was refused.
	f.claimSQL = fmt.Sprintf(`INSERT INTO %s AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token
WHERE f.token < excluded.token
RETURNING f.token`, table)
	f.tokenSQL = fmt.Sprintf(`SELECT token FROM %s WHERE resource = $1`, table)
	return f, nil
}

// Setup creates the fence table if it does not exist:
//
//	CREATE TABLE IF NOT EXISTS <table> (
//		resource text PRIMARY KEY,
//		token    bigint NOT NULL CHECK (token > 0))
//
// A table of that name that already exists is checked: unless it has a
// text (or varchar) resource column with a unique, non-deferrable index on
// it alone and a bigint NOT NULL token column, Setup fails with
// ErrSchemaMismatch, naming the table and what it found, and changes
// nothing. (A text token would compare as text, where '9' > '10', and let
// older tokens through.) An unqualified name resolves on the session's
// search_path.
//
// It is idempotent and safe to call concurrently: a transaction-scoped
// advisory lock serializes the CREATEs, which otherwise race on the catalog
// and can fail with a duplicate-key error. After any error other than
// ErrSchemaMismatch (including a lost connection) calling it again is safe.
// Other errors are the driver's, wrapped.
func (f *FenceTable) Setup(ctx context.Context, db DB) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fencing: create %s: begin: %w", f.name, err)
	}
	defer func() {
		if err != nil {
			rollback(ctx, tx)
		}
	}()
	if _, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('quorumlock/fencing'), hashtext($1))`, f.table); err != nil {
		return fmt.Errorf("fencing: create %s: lock: %w", f.name, err)
	}
	if _, err = tx.Exec(ctx, f.setupSQL); err != nil {
		return fmt.Errorf("fencing: create %s: %w", f.name, err)
	}
	if err = f.checkFenceTable(ctx, tx); err != nil {
		if !errors.Is(err, ErrSchemaMismatch) {
			err = fmt.Errorf("fencing: create %s: read the catalog: %w", f.name, err)
		}
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("fencing: create %s: commit: %w", f.name, err)
	}
	return nil
}

// InTx claims resource for h and runs fn in the same transaction:
//
//	BEGIN
//	INSERT INTO <table> AS f (resource, token) VALUES ($resource, $token)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	WHERE f.token < excluded.token
//	RETURNING f.token
//	-- fn(ctx, tx): the caller's reads and writes, any tables
//	COMMIT
//
// The claim row stays locked until COMMIT, so holders of one resource run
// one after the other in token order: a newer holder's claim waits, then
// re-checks the token on the committed row; an older holder that arrives
// after a newer one committed is refused before fn runs. Reads inside fn see
// everything earlier holders committed, so no update is lost. The tables fn
// touches need no fence column, but every writer of the protected data must
// go through InTx with the same resource name.
//
// The price of the lock: a holder that stalls inside fn (a GC pause, a
// stopped process) delays newer holders until its transaction ends, even
// after its lease expired. Give ctx a deadline no later than the lease's
// (it cancels the query in flight) and set idle_in_transaction_session_timeout
// on the server so a frozen client's transaction is aborted.
//
// When db is a pgx.Tx, InTx runs in a savepoint; the claim's row lock and
// fn's work then last until the caller's transaction ends, and only that
// commit makes them durable.
//
// fn must not commit or roll back tx. Any error from fn is returned as is
// (use errors.Is/As as usual); a panic in fn propagates after the rollback.
//
// Errors: ErrNoToken, ErrTokenRange, ErrEmptyResource before any I/O;
// *StaleTokenError (errors.Is ErrStaleToken) when a newer or equal token
// claimed the resource, in which case fn is not called; fn's error;
// *OutcomeUnknownError (errors.Is ErrOutcomeUnknown, Op "InTx") when the
// COMMIT was perhaps sent and its reply was lost (a broken connection, a
// terminated session, ctx ending mid-COMMIT), so the claim and fn's work
// may be committed; or the driver's error, wrapped with %w.
//
// Every error except ErrOutcomeUnknown means nothing of the claim or of
// fn's work is committed: the transaction was rolled back, or it died with
// its session before COMMIT was sent (the server aborts it), or the server
// refused the COMMIT. After such an error InTx may run again with the same
// lease while the lease is valid; after ErrStaleToken never with this
// lease. After ErrOutcomeUnknown a retry with the same lease is safe too
// (see OutcomeUnknownError): its claim passes only if the first attempt did
// not commit. With a pgx.Tx as db the outcome is never reported unknown:
// only the caller's COMMIT makes the work durable, and the caller judges
// its error. Safe for concurrent use; each call uses its own transaction
// (or savepoint) from db.
func (f *FenceTable) InTx(ctx context.Context, db DB, resource string, h Holder, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	token, err := tokenOf(h)
	if err != nil {
		return err
	}
	if resource == "" {
		return ErrEmptyResource
	}
	if fn == nil {
		return errors.New("fencing: InTx needs a function")
	}

	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fencing: %s %q: begin: %w", f.name, resource, err)
	}
	committed := false
	defer func() {
		if !committed {
			rollback(ctx, tx)
		}
	}()

	var got int64
	err = tx.QueryRow(ctx, f.claimSQL, resource, token).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		// We hold the row lock, so this read is exact.
		var cur int64
		if err := tx.QueryRow(ctx, f.tokenSQL, resource).Scan(&cur); err != nil {
			return fmt.Errorf("fencing: %s %q: claim refused, then reading the token failed: %w", f.name, resource, err)
		}
		return &StaleTokenError{Resource: resource, Token: uint64(token), Current: uint64(cur)}
	}
	if err != nil {
		return fmt.Errorf("fencing: %s %q: claim: %w", f.name, resource, err)
	}

	if err := fn(ctx, tx); err != nil {
		return err
	}
	// Until here every failure left the transaction uncommitted: COMMIT was
	// never sent, and the server aborts an open transaction whose session
	// ends. Only the COMMIT itself can have an unknown outcome.
	if err := tx.Commit(ctx); err != nil {
		if !isTx(db) && !notApplied(err) {
			return &OutcomeUnknownError{Op: "InTx", Resource: resource, Token: uint64(token), Err: fmt.Errorf("commit: %w", err)}
		}
		return fmt.Errorf("fencing: %s %q: commit: %w", f.name, resource, err)
	}
	committed = true
	return nil
}

// Token returns the newest token that claimed resource, or 0 if none did.
// It fails with ErrEmptyResource or the driver's error, wrapped.
// Safe for concurrent use.
func (f *FenceTable) Token(ctx context.Context, db DB, resource string) (uint64, error) {
	if resource == "" {
		return 0, ErrEmptyResource
	}
	var t int64
	err := db.QueryRow(ctx, f.tokenSQL, resource).Scan(&t)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("fencing: read token of %s %q: %w", f.name, resource, err)
	}
	return uint64(t), nil
}

// rollback ends a failed transaction. Its own error is dropped on purpose:
// it either reports a transaction already closed or a connection already
// gone, and in both cases the server has discarded (or will discard) the
// uncommitted work, which is all that matters here.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}
