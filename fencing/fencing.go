package fencing

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Holder is anything that carries a fencing token: *redlock.Lease satisfies
// it. The package depends on this interface, never on the redlock package, so
// tokens minted elsewhere (another lock service, a test) work the same way.
type Holder interface {
	// FencingToken returns the holder's token, or 0 when it has none.
	FencingToken() uint64
}

// DB is the part of pgx this package needs. *pgxpool.Pool, *pgx.Conn and
// pgx.Tx all satisfy it; with a pgx.Tx, Begin opens a savepoint, so the
// fence-table mode nests inside a transaction the caller already holds.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	// ErrStaleToken means a newer (or equal) token has already claimed the
	// resource, and nothing the call asked for was committed. With a newer
	// token the holder lost its lock: retry only with a fresh lease. With an
	// equal token the error also matches ErrAlreadyWritten: test for that
	// first. The error returned is a *StaleTokenError; match it with
	// errors.Is.
	ErrStaleToken = errors.New("fencing: stale token: a newer or equal token already claimed the resource")

	// ErrAlreadyWritten means the holder's own token already raised the
	// fence, and nobody newer has: a second Write by the same lease (a token
	// writes a row once in write-only mode), a second Claim, or a second
	// FenceTable.InTx. The lease has not lost the resource; the call was
	// refused all the same, and nothing it asked for was committed. For
	// several writes per lease use claim-first (Claim once, then WriteClaimed
	// as often as needed) or one FenceTable.InTx. It is a *StaleTokenError
	// with Current equal to Token, so it also matches ErrStaleToken, as
	// every refusal of an equal token always has.
	ErrAlreadyWritten = errors.New("fencing: this token already wrote or claimed the resource")

	// ErrNoToken means the holder is nil or its token is 0, which is what a
	// lease from a client built without fencing carries. Nothing was sent to
	// the database.
	ErrNoToken = errors.New("fencing: holder has no fencing token (was the lock client built with fencing?)")

	// ErrTokenRange means the token does not fit PostgreSQL's bigint
	// (it is above math.MaxInt64). Nothing was sent to the database.
	ErrTokenRange = errors.New("fencing: token exceeds the bigint range")

	// ErrEmptyResource means the resource name or row key is empty (or nil).
	// Nothing was sent to the database.
	ErrEmptyResource = errors.New("fencing: empty resource")

	// ErrInvalidIdentifier means a table, schema or column name given to a
	// constructor is empty, too long for PostgreSQL (63 bytes), contains a
	// NUL byte, or names the same column twice.
	ErrInvalidIdentifier = errors.New("fencing: invalid identifier")

	// ErrNoRow means the guarded row does not exist. Guard never inserts
	// rows: create them (with fence 0) before guarding them.
	ErrNoRow = errors.New("fencing: no row with that key")

	// ErrNotClaimed means WriteClaimed found a fence below the holder's
	// token: the holder never claimed the row (call Claim first). Nothing
	// was written.
	ErrNotClaimed = errors.New("fencing: row not claimed by this token (call Claim first)")
)

// StaleTokenError is the error a refused holder gets. It matches
// ErrStaleToken with errors.Is and carries the numbers for logs and metrics.
type StaleTokenError struct {
	// Resource names what was refused: the fence table's resource, or the
	// guarded table and row key.
	Resource string
	// Token is the refused holder's token.
	Token uint64
	// Current is the fence the resource held when it was read after the
	// refusal; it is >= Token. Fences never go down, so a value read later
	// than the refusal can only be larger, never misleadingly smaller.
	Current uint64
}

func (e *StaleTokenError) Error() string {
	if e.Current == e.Token {
		return fmt.Sprintf("fencing: token %d already wrote or claimed %s (the fence equals it; nobody newer has): a token writes once in write-only mode; for several writes per lease use Claim and WriteClaimed", e.Token, e.Resource)
	}
	return fmt.Sprintf("fencing: stale token %d for %s: fence is already %d", e.Token, e.Resource, e.Current)
}

// Is reports whether target is ErrStaleToken, or ErrAlreadyWritten when
// the fence equals the token. Current is read after the refusal and fences
// never go down, so Current equal to Token means the fence was exactly
// Token when the call was refused: the holder's own earlier write or
// claim, not a newer holder's.
func (e *StaleTokenError) Is(target error) bool {
	return target == ErrStaleToken || (target == ErrAlreadyWritten && e.Current == e.Token)
}

// Unwrap returns ErrStaleToken.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// tokenOf validates h's token before anything reaches the database and
// returns it as the int64 PostgreSQL stores.
func tokenOf(h Holder) (int64, error) {
	if h == nil {
		return 0, ErrNoToken
	}
	t := h.FencingToken()
	switch {
	case t == 0:
		return 0, ErrNoToken
	case t > math.MaxInt64:
		return 0, fmt.Errorf("%w: %d", ErrTokenRange, t)
	}
	return int64(t), nil
}
