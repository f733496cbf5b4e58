package fencing

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// GuardConfig names the protected table and its columns. Every name is used
// as a quoted identifier (exact, case-sensitive, never spliced raw into SQL).
type GuardConfig struct {
	// Schema is optional; empty means the connection's search_path decides.
	Schema string
	// Table holds the protected rows. Required.
	Table string
	// KeyColumn identifies a row; it must be unique (a primary key), or a
	// write would touch several rows. Required.
	KeyColumn string
	// FenceColumn is a bigint NOT NULL column holding the newest token that
	// claimed or wrote the row; Setup adds it. Required: "fence" is the
	// conventional name.
	FenceColumn string
}

// Values maps column names to the values a guarded write stores. Names are
// quoted identifiers; values travel as bind parameters.
type Values map[string]any

// Guard protects rows of one table with a fence column, for the write-only
// mode (Write) and the claim-first mode (Claim, then WriteClaimed; or Update
// for both). A Guard holds only prepared SQL text: it is immutable and safe
// for concurrent use by any number of goroutines and databases.
type Guard struct {
	name      string // for messages
	table     string // quoted, maybe schema-qualified
	keyName   string
	fenceName string
	key       string // quoted
	fence     string // quoted

	setupSQL string
	claimSQL string
	fenceSQL string
}

// NewGuard validates cfg and returns a Guard. It fails with
// ErrInvalidIdentifier when a name is empty, longer than 63 bytes, contains
// a NUL byte, or when KeyColumn and FenceColumn are the same. It does no I/O.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	table, err := qualified(cfg.Schema, cfg.Table)
	if err != nil {
		return nil, err
	}
	if err := checkIdent("key column", cfg.KeyColumn); err != nil {
		return nil, err
	}
	if err := checkIdent("fence column", cfg.FenceColumn); err != nil {
		return nil, err
	}
	if cfg.KeyColumn == cfg.FenceColumn {
		return nil, fmt.Errorf("%w: key and fence column are both %q", ErrInvalidIdentifier, cfg.KeyColumn)
	}
	g := &Guard{
		name:      strings.TrimPrefix(cfg.Schema+"."+cfg.Table, "."),
		table:     table,
		keyName:   cfg.KeyColumn,
		fenceName: cfg.FenceColumn,
		key:       quote(cfg.KeyColumn),
		fence:     quote(cfg.FenceColumn),
	}
	g.setupSQL = fmt.Sprintf(`ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s bigint NOT NULL DEFAULT 0`, g.table, g.fence)
	// Strict "<": an equal token is refused too, so a token minted twice
	// (a bug upstream) shows up as an error instead of two writers.
	g.claimSQL = fmt.Sprintf(`UPDATE %s SET %s = $1 WHERE %s = $2 AND %s < $1`, g.table, g.fence, g.key, g.fence)
	g.fenceSQL = fmt.Sprintf(`SELECT %s FROM %s WHERE %s = $1`, g.fence, g.table, g.key)
	return g, nil
}

// Setup adds the fence column to the table if it is missing:
//
//	ALTER TABLE <table> ADD COLUMN IF NOT EXISTS <fence> bigint NOT NULL DEFAULT 0
//
// Existing rows start at fence 0, below every valid token. The table must
// already exist (the server's undefined_table error is returned, wrapped).
// An unqualified table resolves on the session's search_path, for the
// check and the ALTER alike.
//
// A fence column that already exists is checked, not altered: unless it is
// bigint NOT NULL, Setup fails with ErrSchemaMismatch, naming the table,
// the column and the type it found, and changes nothing. (A text fence
// would compare as text, where '9' > '10', and let older tokens through.)
// A correct column costs one catalog read and no lock on the table. When
// the column is missing, the ALTER and a second check run in one
// transaction under the ALTER's ACCESS EXCLUSIVE lock, so a column someone
// added with another type in between is refused too.
//
// Setup is idempotent: after any error other than ErrSchemaMismatch
// (including a lost connection, whatever it did) calling it again is safe.
// Safe for concurrent use.
func (g *Guard) Setup(ctx context.Context, db DB) (err error) {
	col, found, err := lookupColumn(ctx, db, g.table, g.fenceName)
	if err != nil {
		return fmt.Errorf("fencing: set up %s: read the catalog: %w", g.name, err)
	}
	if found && col.exists {
		return fenceShape(col, g.fenceName)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fencing: add fence column to %s: begin: %w", g.name, err)
	}
	defer func() {
		if err != nil {
			rollback(ctx, tx)
		}
	}()
	if _, err = tx.Exec(ctx, g.setupSQL); err != nil {
		return fmt.Errorf("fencing: add fence column to %s: %w", g.name, err)
	}
	// The ALTER skips a column added since the read above; its lock makes
	// this second read exact.
	if col, _, err = lookupColumn(ctx, tx, g.table, g.fenceName); err != nil {
		return fmt.Errorf("fencing: add fence column to %s: read the catalog: %w", g.name, err)
	}
	if err = fenceShape(col, g.fenceName); err != nil {
		return err
	}
	if err = tx.Commit(ctx); err != nil {
		return fmt.Errorf("fencing: add fence column to %s: commit: %w", g.name, err)
	}
	return nil
}

// Write is the write-only mode: one statement stores vals and h's token,
// and applies only if every earlier write or claim carried a smaller token:
//
//	UPDATE <table> SET <fence> = $token, <col> = $v, ...
//	WHERE <key> = $key AND <fence> < $token
//
// Under READ COMMITTED an UPDATE blocked by a concurrent writer re-checks its
// WHERE clause on the row version that writer committed, so two writers can
// never both pass the check. What Write cannot catch: a holder that READ the
// row before a newer holder wrote it, and writes before the newer holder
// does, passes the check with a value computed from stale data, and the newer
// holder then overwrites it; one update is lost. Use Claim/WriteClaimed or
// FenceTable when the written value depends on a read.
//
// Each token can write a row once: a second Write with the same token is
// refused, because the fence already equals it, with ErrAlreadyWritten
// (which also matches ErrStaleToken). A holder that writes a row several
// times per lease uses Claim once and then WriteClaimed.
//
// Errors: ErrNoToken, ErrTokenRange, ErrEmptyResource (nil or "" key) and
// ErrInvalidIdentifier (bad or reserved column in vals) before any I/O;
// *StaleTokenError (errors.Is ErrStaleToken) when a newer or equal token got
// there first, which also matches ErrAlreadyWritten when the token was this
// one (an earlier Write or Claim of the same lease); ErrNoRow when no row has that key; *OutcomeUnknownError
// (errors.Is ErrOutcomeUnknown) when the statement was perhaps sent and its
// reply was lost (a broken connection, a terminated session, ctx ending
// mid-request): it may have been committed, and OutcomeUnknownError says
// how to find out; otherwise the driver's error, wrapped.
//
// Every error except ErrOutcomeUnknown means nothing was written: the
// statement was never sent, or matched no row, or failed on the server and
// rolled back. Such a holder may call Write again with the same lease while
// the lease is valid, except after ErrStaleToken (never with this lease).
// With a pgx.Tx as db the outcome is never reported unknown: nothing is
// durable before the caller's own COMMIT, whose error the caller judges.
// Safe for concurrent use.
func (g *Guard) Write(ctx context.Context, db DB, key any, h Holder, vals Values) error {
	return g.write(ctx, db, key, h, vals, false)
}

// Upsert is Write for a row that may not exist yet: where no row has key
// it inserts one with key, h's token as its fence and vals; otherwise it
// updates the row as Write does, only if every earlier write or claim
// carried a smaller token:
//
//	INSERT INTO <table> AS cur (<key>, <fence>, <col>, ...) VALUES ($2, $1, $3, ...)
//	ON CONFLICT (<key>) DO UPDATE SET <fence> = EXCLUDED.<fence>, <col> = EXCLUDED.<col>, ...
//	WHERE cur.<fence> < EXCLUDED.<fence>
//
// The key column must carry a unique index (a primary key, say); without
// one PostgreSQL refuses the statement (SQLSTATE 42P10) and nothing is
// written. PostgreSQL decides between insert and update atomically: two
// holders that find no row at once both meet the unique index, the later
// takes the update branch, and its WHERE clause sees the row the earlier
// one inserted, so the row ends with the larger token's values whichever
// commits first. Columns not in vals take their defaults on insert and
// keep their values on update.
//
// What Write cannot catch, Upsert cannot either (a holder that read the
// row before a newer holder wrote it); the errors and the retry rules are
// Write's, except that a missing row is no error.
// Safe for concurrent use.
func (g *Guard) Upsert(ctx context.Context, db DB, key any, h Holder, vals Values) error {
	token, err := g.check(key, h)
	if err != nil {
		return err
	}
	names, err := g.columns(vals)
	if err != nil {
		return err
	}
	cols, params, sets := make([]string, len(names)), make([]string, len(names)), make([]string, len(names))
	args := []any{token, key}
	for i, name := range names {
		q := quote(name)
		cols[i], params[i], sets[i] = q, "$"+strconv.Itoa(3+i), q+" = EXCLUDED."+q
		args = append(args, vals[name])
	}
	sql := fmt.Sprintf(`INSERT INTO %s AS cur (%s, %s, %s) VALUES ($2, $1, %s) ON CONFLICT (%s) DO UPDATE SET %s = EXCLUDED.%s, %s WHERE cur.%s < EXCLUDED.%s`,
		g.table, g.key, g.fence, strings.Join(cols, ", "), strings.Join(params, ", "),
		g.key, g.fence, g.fence, strings.Join(sets, ", "), g.fence, g.fence)
	return g.exec(ctx, db, "Upsert", key, token, false, sql, args...)
}

// write is Write (claimed false: the statement also raises the fence past
// every earlier token) and WriteClaimed (claimed: the fence must equal the
// token). The token is $1 and the key $2.
func (g *Guard) write(ctx context.Context, db DB, key any, h Holder, vals Values, claimed bool) error {
	token, err := g.check(key, h)
	if err != nil {
		return err
	}
	cols, args, err := g.assignments(vals, 3)
	if err != nil {
		return err
	}
	op, sql := "Write", fmt.Sprintf(`UPDATE %s SET %s = $1, %s WHERE %s = $2 AND %s < $1`, g.table, g.fence, cols, g.key, g.fence)
	if claimed {
		op, sql = "WriteClaimed", fmt.Sprintf(`UPDATE %s SET %s WHERE %s = $2 AND %s = $1`, g.table, cols, g.key, g.fence)
	}
	return g.exec(ctx, db, op, key, token, claimed, sql, append([]any{token, key}, args...)...)
}

// Fence returns the row's current fence: 0 if no token touched it yet.
// It fails with ErrEmptyResource, ErrNoRow, or the driver's error, wrapped.
// Safe for concurrent use.
func (g *Guard) Fence(ctx context.Context, db DB, key any) (uint64, error) {
	if isEmptyKey(key) {
		return 0, ErrEmptyResource
	}
	var f int64
	err := db.QueryRow(ctx, g.fenceSQL, key).Scan(&f)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, fmt.Errorf("%w: %s key %v", ErrNoRow, g.name, key)
	case err != nil:
		return 0, fmt.Errorf("fencing: read fence of %s key %v: %w", g.name, key, err)
	}
	return uint64(f), nil
}

func (g *Guard) check(key any, h Holder) (int64, error) {
	token, err := tokenOf(h)
	if err != nil {
		return 0, err
	}
	if isEmptyKey(key) {
		return 0, ErrEmptyResource
	}
	return token, nil
}

func isEmptyKey(key any) bool {
	if key == nil {
		return true
	}
	s, ok := key.(string)
	return ok && s == ""
}

// assignments renders vals as `"col" = $n, ...` in a stable column order,
// numbering parameters from first.
func (g *Guard) assignments(vals Values, first int) (string, []any, error) {
	names, err := g.columns(vals)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	args := make([]any, 0, len(names))
	for i, name := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(name))
		b.WriteString(" = $")
		b.WriteString(strconv.Itoa(first + i))
		args = append(args, vals[name])
	}
	return b.String(), args, nil
}

// columns returns the column names of vals, sorted, after the checks
// every guarded write makes: at least one, each a valid identifier, none
// the key or the fence column.
func (g *Guard) columns(vals Values) ([]string, error) {
	if len(vals) == 0 {
		return nil, errors.New("fencing: no values to write")
	}
	names := make([]string, 0, len(vals))
	for name := range vals {
		if err := checkIdent("column", name); err != nil {
			return nil, err
		}
		if name == g.keyName || name == g.fenceName {
			return nil, fmt.Errorf("%w: column %q is managed by the guard", ErrInvalidIdentifier, name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}
