package fencing

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// maxIdentLen is PostgreSQL's NAMEDATALEN-1. Longer names are truncated by
// the server without an error, which could silently point two guards at the
// same column; refusing them is the only safe answer.
const maxIdentLen = 63

// checkIdent validates one caller-supplied identifier. Quoting (in quote)
// already makes any string harmless to the SQL; this check exists so that a
// mistake (an empty or truncated name) fails loudly at construction time.
func checkIdent(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidIdentifier, what)
	case len(name) > maxIdentLen:
		return fmt.Errorf("%w: %s %q is longer than %d bytes", ErrInvalidIdentifier, what, name, maxIdentLen)
	case strings.IndexByte(name, 0) >= 0:
		// pgx's Sanitize drops NUL bytes, which would change the name.
		return fmt.Errorf("%w: %s %q contains a NUL byte", ErrInvalidIdentifier, what, name)
	}
	return nil
}

// qualified validates and quotes an optional schema and a table name.
func qualified(schema, table string) (string, error) {
	if err := checkIdent("table", table); err != nil {
		return "", err
	}
	if schema == "" {
		return pgx.Identifier{table}.Sanitize(), nil
	}
	if err := checkIdent("schema", schema); err != nil {
		return "", err
	}
	return pgx.Identifier{schema, table}.Sanitize(), nil
}

// quote returns a column name as a quoted identifier. Every identifier that
// reaches SQL text goes through pgx.Identifier.Sanitize; every value goes as
// a bind parameter. No caller string is ever spliced in unquoted.
func quote(name string) string { return pgx.Identifier{name}.Sanitize() }
