// Package fencing implements the PostgreSQL side of fencing tokens: the
// database, not the lock, refuses a holder whose token is older than one it
// has already seen. A lock lease can expire while its holder is paused (GC,
// SIGSTOP, a slow network); fencing makes that holder's late writes fail
// with ErrStaleToken instead of overwriting a newer holder's work.
//
// The package takes a Holder (anything with FencingToken() uint64, such as
// *redlock.Lease) and a DB (*pgxpool.Pool, *pgx.Conn or pgx.Tx). It does
// not import the lock package.
//
// # Three modes
//
// Write-only (Guard.Write). The protected table has a bigint fence column.
// The write carries the token and applies only if the fence is below it:
//
//	UPDATE t SET fence = $token, col = $v WHERE key = $key AND fence < $token
//
// One statement, no extra round trip. Limit: a holder that read the row
// before a newer holder wrote it, and writes first, passes the check with a
// value computed from data the newer holder is about to overwrite: one
// update is lost when critical sections overlap.
//
// Claim-first (Guard.Claim then Guard.WriteClaimed, or Guard.Update). The
// holder stamps its token on the row before reading, then writes only while
// the stamp is still its own:
//
//	UPDATE t SET fence = $token WHERE key = $key AND fence < $token  -- claim
//	SELECT ...                                                       -- read, compute
//	UPDATE t SET col = $v WHERE key = $key AND fence = $token        -- write
//
// A newer holder that claims after the read replaces the stamp, so the older
// write is refused. No update is lost, one extra statement per section.
//
// # Several writes per lease
//
// Write-only lets a token write a row once: the fence then equals the
// token, and a second Write with it is refused with ErrAlreadyWritten (a
// *StaleTokenError that also matches ErrStaleToken: the lease is not lost,
// but the write was not made). A holder that writes a row more than once
// per lease (status "processing", then "done") uses claim-first: Claim
// once, then WriteClaimed as often as it needs, each refused only once a
// newer holder claimed the row. Or it puts every statement in one
// FenceTable.InTx. Allowing the equal token in Write was rejected: its
// strict check is what lets a retry after ErrOutcomeUnknown tell that the
// first attempt landed, and what makes a token minted twice show up.
//
// Fence table in one transaction (FenceTable.InTx). A separate table holds
// one (resource, token) row per protected resource. The row is claimed with a
// strict "<" at the start of a transaction and the caller's work runs in that
// transaction, so the row lock orders holders:
//
//	BEGIN
//	INSERT INTO fencing_tokens AS f (resource, token) VALUES ($r, $token)
//	ON CONFLICT (resource) DO UPDATE SET token = excluded.token
//	WHERE f.token < excluded.token RETURNING f.token
//	... the caller's statements ...
//	COMMIT
//
// No update is lost and no column is added to the data, but a holder that
// stalls inside its transaction delays the next one until the transaction
// ends (bound it with a ctx deadline and idle_in_transaction_session_timeout).
//
// # Why two writers cannot both pass a check
//
// Under READ COMMITTED (PostgreSQL's default), an UPDATE or ON CONFLICT DO
// UPDATE that finds its row locked by another transaction waits for it, then
// evaluates its WHERE clause again on the row version that transaction
// committed. Two writers with a fence check on one row are therefore
// serialized, and the second sees the first's fence. Under REPEATABLE READ or
// SERIALIZABLE (a caller's transaction passed as DB) the second writer gets a
// serialization failure instead, returned wrapped; nothing is written.
//
// # Tokens
//
// Token 0 means "no fencing" (a lease from a client without fencing) and is
// refused with ErrNoToken before any I/O; tokens above math.MaxInt64 do not
// fit bigint and are refused with ErrTokenRange. Checks are strict: a token
// equal to the fence is stale, so a token minted twice shows up as an error.
// Fences only go up.
//
// # Errors and retries
//
// Every error except ErrOutcomeUnknown means nothing the call asked for
// was committed: the request was never sent, the guarded statement matched
// no row, or the server refused the statement or the COMMIT (an ERROR
// aborts its transaction). What the holder may do next:
//
//   - ErrAlreadyWritten (check it before ErrStaleToken, which it also
//     matches): this lease's token already wrote or claimed the resource
//     and nobody newer has. The lease still holds; the call did nothing.
//     In write-only mode a token writes once: use Claim and WriteClaimed
//     for more. After ErrOutcomeUnknown it means the earlier attempt landed.
//   - ErrStaleToken otherwise: a newer holder owns the resource. Never
//     retry with this lease; a fresh lease re-reads what the newer holder
//     wrote.
//   - ErrNoToken, ErrTokenRange, ErrEmptyResource, ErrInvalidIdentifier,
//     ErrNoRow, ErrNotClaimed, ErrSchemaMismatch: the input is wrong; the
//     same call fails the same way until it is fixed.
//   - any other error (a context that ended before anything was sent, a
//     pool that could not connect, a constraint violation, a serialization
//     failure): retry with the same lease while it is valid.
//
// ErrOutcomeUnknown (an *OutcomeUnknownError) means the statement or COMMIT
// was perhaps sent and its reply never read: the connection broke, the
// session was terminated, or ctx ended mid-request. It may be committed,
// may still be running on the server, or may never have arrived; the
// client cannot tell these apart. Repeating the call with the same token
// and the same values never applies a write twice, because every check is
// a strict "fence < token" under the row lock (WriteClaimed's "fence =
// token" writes the same values again, which leaves the row as one write
// did); recomputing the values from a new read is what could apply a
// change twice. A retry refused
// with StaleTokenError.Current equal to the holder's own token shows that
// the earlier attempt landed. OutcomeUnknownError details each step.
//
// # Safety of names
//
// Table, schema and column names are always quoted with
// pgx.Identifier.Sanitize and every value is a bind parameter, so a name such
// as `a"; drop table x; --` is just an odd table name. Names are
// case-sensitive as a consequence (quoted identifiers are not folded).
//
// See docs/fencing-postgres.md for the guarantees of each mode in detail.
package fencing
