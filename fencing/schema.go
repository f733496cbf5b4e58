package fencing

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrSchemaMismatch means Setup found a fence column or fence table that
// already exists in a shape the checks cannot rely on (for example a fence
// of type integer or text). Setup changed nothing; fix the column or table
// (or configure another name) and call Setup again.
var ErrSchemaMismatch = errors.New("fencing: existing schema does not fit")

// column is what the catalog says about one column of a table, looked up
// through to_regclass so that an unqualified name resolves on the session's
// search_path exactly as the guarded statements will.
type column struct {
	table    string // schema-qualified, as found
	exists   bool
	typ      string // format_type, e.g. "integer", "numeric(20,0)"
	base     string // the type without modifiers, e.g. "character varying"
	isBigint bool
	notNull  bool
}

// columnSQL returns no row when the table does not exist, and a row with
// exists false when the table exists without the column.
const columnSQL = `SELECT format('%I.%I', n.nspname, c.relname),
	a.attname IS NOT NULL,
	coalesce(format_type(a.atttypid, a.atttypmod), ''),
	coalesce(a.atttypid::regtype::text, ''),
	coalesce(a.atttypid = 'bigint'::regtype, false),
	coalesce(a.attnotnull, false)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = $2 AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.oid = to_regclass($1)`

// lookupColumn reads the column name of table (a quoted, maybe qualified
// name). found is false when the table does not exist.
func lookupColumn(ctx context.Context, q DB, table, name string) (col column, found bool, err error) {
	err = q.QueryRow(ctx, columnSQL, table, name).Scan(&col.table, &col.exists, &col.typ, &col.base, &col.isBigint, &col.notNull)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return column{}, false, nil
	case err != nil:
		return column{}, false, err
	}
	return col, true, nil
}

// fenceShape says what is wrong with an existing fence or token column, or
// nil when it is bigint NOT NULL. Only bigint is safe: a text fence compares
// as text ('9' > '10', so an older token passes), numeric and integer hold
// other ranges than the tokens, and a nullable fence makes every check
// NULL, so every holder is refused.
func fenceShape(c column, name string) error {
	switch {
	case !c.isBigint:
		return fmt.Errorf("%w: table %s column %q has type %s; a fence must be bigint NOT NULL (nothing was changed)", ErrSchemaMismatch, c.table, name, c.typ)
	case !c.notNull:
		return fmt.Errorf("%w: table %s column %q is bigint but nullable; a fence must be bigint NOT NULL (nothing was changed)", ErrSchemaMismatch, c.table, name)
	}
	return nil
}

// uniqueSQL finds an index that ON CONFLICT (resource) can use as its
// arbiter: unique, immediate, not partial, on that one plain column.
const uniqueSQL = `SELECT EXISTS (
	SELECT 1 FROM pg_index i
	JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
	WHERE i.indrelid = to_regclass($1) AND a.attname = 'resource'
	  AND i.indisunique AND i.indimmediate AND i.indpred IS NULL AND i.indnkeyatts = 1)`

// checkFenceTable verifies an existing fence table (inside Setup's
// transaction, after CREATE TABLE IF NOT EXISTS).
func (f *FenceTable) checkFenceTable(ctx context.Context, q DB) error {
	res, found, err := lookupColumn(ctx, q, f.table, "resource")
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: fence table %s not found after creating it", ErrSchemaMismatch, f.name)
	}
	if !res.exists || (res.base != "text" && res.base != "character varying") {
		typ := "missing"
		if res.exists {
			typ = "of type " + res.typ
		}
		return fmt.Errorf("%w: table %s is not a fence table: column \"resource\" is %s, want text (nothing was changed)", ErrSchemaMismatch, res.table, typ)
	}
	tok, _, err := lookupColumn(ctx, q, f.table, "token")
	if err != nil {
		return err
	}
	if !tok.exists {
		return fmt.Errorf("%w: table %s is not a fence table: column \"token\" is missing (nothing was changed)", ErrSchemaMismatch, res.table)
	}
	if err := fenceShape(tok, "token"); err != nil {
		return err
	}
	var unique bool
	if err := q.QueryRow(ctx, uniqueSQL, f.table).Scan(&unique); err != nil {
		return err
	}
	if !unique {
		return fmt.Errorf("%w: table %s has no unique, non-deferrable index on resource alone, which the claim's ON CONFLICT needs (nothing was changed)", ErrSchemaMismatch, res.table)
	}
	return nil
}
