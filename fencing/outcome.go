package fencing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrOutcomeUnknown means the statement or COMMIT that would have made the
// holder's work durable may or may not have been committed: the connection
// broke, the server ended the session, or ctx ended after the request had
// (perhaps) left the client and before the reply was read. The server may
// have committed it, may still be running it, or may never have received
// it. The error returned is an *OutcomeUnknownError; match it with
// errors.Is. See OutcomeUnknownError for what to do next.
var ErrOutcomeUnknown = errors.New("fencing: outcome unknown: the write may have been committed")

// OutcomeUnknownError is the error of a write whose commit cannot be
// confirmed or ruled out. It matches ErrOutcomeUnknown with errors.Is and
// unwraps to the driver's error, so errors.Is(err, context.DeadlineExceeded)
// and errors.As(err, &pgErr) still see the cause.
//
// Every step runs at most once per token, or writes the same values again,
// so the holder may settle the question while its lease is valid:
//
//   - Op "Write": retry Write with the same token and values. The strict
//     "fence < token" lets at most one of the attempts through. A refusal
//     that matches ErrAlreadyWritten (StaleTokenError.Current equals Token)
//     means the earlier attempt landed; a larger Current means a newer holder wrote since, and only
//     the data can tell whether this holder's write landed before it.
//   - Op "Claim": read Guard.Fence. Equal to Token: the claim landed, go on
//     reading and call WriteClaimed. Below Token: call Claim again (a
//     refusal with Current equal to Token again means it landed). Above
//     Token: a newer holder claimed the row; give up the lease.
//   - Op "WriteClaimed": retry WriteClaimed with the same token and the
//     same Values, never with values recomputed from a new read: Values are
//     absolute assignments, so writing them twice leaves the row as writing
//     them once, but if the first attempt landed a new read already
//     contains its result and recomputing from it would apply the change
//     twice. The fence does not tell (it equals Token whether or not the
//     write landed). A stale refusal means a newer holder claimed the row;
//     it read whatever this holder committed, so nothing is lost, but only
//     the data tells whether this write is part of it.
//   - Op "InTx": retry InTx with the same token. Its claim waits for the
//     row lock of a transaction that may still be committing and then
//     applies the strict "<": it passes only if the earlier transaction did
//     not commit, and a refusal with Current equal to Token means it did.
//
// Reading the fence right after the failure is not final when it is below
// Token: a statement the server received keeps running after the client is
// gone and may still commit. A retry does not have that problem, because
// it waits for the row lock and then re-checks the fence.
type OutcomeUnknownError struct {
	// Op names the step whose outcome is unknown: "Write", "Claim",
	// "WriteClaimed" (also from Update) or "InTx" (its COMMIT).
	Op string
	// Resource is the fence-table resource, or the guarded table and key.
	Resource string
	// Token is the holder's token.
	Token uint64
	// Err is the driver's error.
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("fencing: outcome of %s with token %d on %s unknown, it may have been committed: %v", e.Op, e.Token, e.Resource, e.Err)
}

// Is reports whether target is ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Unwrap returns the driver's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// notApplied reports whether err, returned by the statement or COMMIT that
// would have made work durable, proves that nothing was committed. Only
// positive evidence counts; everything else is an unknown outcome:
//
//   - pgconn.SafeToRetry: pgconn guarantees nothing was sent (a context
//     already done, a connection already closed or busy).
//   - a *pgconn.ConnectError: the connection never came up.
//   - a server error of severity ERROR: PostgreSQL aborts the transaction
//     the error occurred in, including a COMMIT that fails (a deferred
//     constraint, a serialization failure) and the implicit transaction of
//     a single statement. FATAL and PANIC are not taken as evidence: they
//     end the session, PostgreSQL avoids sending them after a commit but
//     the protocol does not promise it, and a pooler in between (PgBouncer)
//     sends FATAL of its own when its server connection dies, whatever the
//     server had done by then.
//   - pgx.ErrTxCommitRollback: the server answered COMMIT with ROLLBACK.
//
// A broken socket (what a client sees when its session is terminated while
// the COMMIT waits for a synchronous standby: the commit is already
// durable locally, the server sends a WARNING and closes), a context that
// ended mid-request (pgconn closes the connection and returns
// context.Canceled or a timeout) and anything not
// recognized, such as a value pgx failed to encode before sending, are
// unknown. Guessing "not applied" where the commit happened is the failure
// this classification exists to prevent; reporting unknown for a write that
// never left costs the caller one re-read or retry. (Matching pgx's error
// text to recognize its encoding errors was rejected for the same reason:
// a message that changes would turn into a wrong "not applied".)
func notApplied(err error) bool {
	if pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxCommitRollback) {
		return true
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized // absent before PostgreSQL 9.6
		if sev == "" {
			sev = pgErr.Severity
		}
		return strings.EqualFold(sev, "ERROR")
	}
	return false
}

// isTx reports whether db is a transaction the caller holds. Nothing done
// through it is durable until the caller's own COMMIT, so no failure inside
// it has an unknown outcome: that COMMIT, which the caller runs, decides.
func isTx(db DB) bool {
	_, ok := db.(pgx.Tx)
	return ok
}
