package fencing

import (
	"context"
	"errors"
)

// Claim is step one of the claim-first mode: it stamps h's token on the row
// before the caller reads it, raising the fence only if the token is
// strictly greater than the fence:
//
//	UPDATE <table> SET <fence> = $token WHERE <key> = $key AND <fence> < $token
//
// Read the row only after Claim returned nil, compute, then store the result
// with WriteClaimed. Because the stamp is committed before the read (pass a
// pool or a connection, not a transaction, to get that), any newer holder
// that claims afterwards replaces the stamp and makes this holder's
// WriteClaimed fail: no update is lost, whatever the interleaving.
//
// When db is a transaction the stamp holds the row lock until that
// transaction ends, which serializes holders the way FenceTable does.
//
// Errors are those of Write. After ErrOutcomeUnknown (Op "Claim") the
// stamp may be on the row: read Fence before reading the data, as
// OutcomeUnknownError explains. On every other error the fence is
// unchanged. Safe for concurrent use.
func (g *Guard) Claim(ctx context.Context, db DB, key any, h Holder) error {
	token, err := g.check(key, h)
	if err != nil {
		return err
	}
	return g.exec(ctx, db, "Claim", key, token, false, g.claimSQL, token, key)
}

// WriteClaimed is step two of the claim-first mode: it stores vals only
// while the row still carries h's stamp from Claim:
//
//	UPDATE <table> SET <col> = $v, ... WHERE <key> = $key AND <fence> = $token
//
// If a newer holder claimed in between, the fence is larger and the write is
// refused. A blocked UPDATE re-checks the fence on the newer row version
// (READ COMMITTED), so a claim that commits while this write waits still
// wins. The same token may write the row again as long as nobody newer
// claimed it.
//
// Errors: those of Write, plus ErrNotClaimed when the fence is below the
// token (Claim was not called). After ErrOutcomeUnknown (Op "WriteClaimed")
// the values may be stored: retry with the same values, never recomputed
// ones (see OutcomeUnknownError). On every other error nothing was written.
// Safe for concurrent use.
func (g *Guard) WriteClaimed(ctx context.Context, db DB, key any, h Holder, vals Values) error {
	return g.write(ctx, db, key, h, vals, true)
}

// Update runs the whole claim-first mode: Claim, then fn (which reads the
// row through any connection and returns the values to store), then
// WriteClaimed. An error from fn is returned as is, and nothing is written;
// the claim stays, which is harmless (only newer tokens can pass it).
// Errors and concurrency are those of Claim and WriteClaimed; an
// *OutcomeUnknownError names the step that failed in Op.
//
// Do not call Update again with the same holder after ErrOutcomeUnknown: if
// the claim landed, the new claim is refused as stale, so nothing is lost
// but nothing is done either. Settle the step with Fence, Claim and
// WriteClaimed as OutcomeUnknownError explains, or find out from the data
// whether the write landed before running Update with a fresh lease, which
// would otherwise read the landed write and apply the change again.
func (g *Guard) Update(ctx context.Context, db DB, key any, h Holder, fn func(ctx context.Context) (Values, error)) error {
	if fn == nil {
		return errors.New("fencing: Update needs a function")
	}
	if err := g.Claim(ctx, db, key, h); err != nil {
		return err
	}
	vals, err := fn(ctx)
	if err != nil {
		return err
	}
	return g.WriteClaimed(ctx, db, key, h, vals)
}
