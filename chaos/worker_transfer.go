package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// The transfers style: each section moves money between two accounts,
// rows of the accounts table, each locked by a key of its own. The worker
// takes both keys at once (Client.LockAll), then, in one database
// transaction, reads both rows, works, writes both and enters the
// transfer in the ledger. Each row is checked against the token of its
// own key, so a stale holder's transfer is refused as a whole: both rows
// and the ledger entry, or nothing.

const (
	// transferAccounts is how many accounts there are: few, so that the
	// workers' pairs share accounts often.
	transferAccounts = 5
	// openingBalance is every account's balance before the first transfer.
	openingBalance = 1000
	// maxAmount is the largest amount one transfer moves.
	maxAmount = 50
)

// accountKey is the lock key of account id.
func accountKey(id int) string { return fmt.Sprintf("chaos:account:%d", id) }

// accountResource is account id's resource in the fence table.
func accountResource(id int) string { return fmt.Sprintf("account:%d", id) }

// transfer is one transfer a worker makes. One that fencing refused is
// made again, with the same id, under a fresh lease, as a refused
// increment is; one that ended in any other error is not (it may have
// been committed), and the next attempt makes a new one.
type transfer struct {
	id       string
	from, to int
	amount   int64
}

// nextTransfer picks the worker's next transfer: two distinct accounts
// at random, except on an attempt the coordinator gates (a scripted
// fault's holder and the others it plays against it). There the holder
// (worker 0) transfers between accounts 1 and 2 and the others between 2
// and 3: they want one of the holder's keys, not both, so that a stale
// holder finds one of its rows taken over by a newer holder and the other
// not, and its transfer must still be refused whole (the row taken over
// is the one it writes second).
func (w *worker) nextTransfer(attempt int) transfer {
	w.made++
	from, to := 1, 2
	if w.cfg.ID != 0 {
		from, to = 2, 3
	}
	if attempt >= w.cfg.GateUntil || len(w.cfg.Gates) == 0 {
		from = 1 + w.rng.IntN(transferAccounts)
		to = 1 + w.rng.IntN(transferAccounts-1)
		if to >= from {
			to++
		}
	}
	if w.rng.IntN(2) == 0 {
		from, to = to, from
	}
	return transfer{id: fmt.Sprintf("w%d-%d", w.cfg.ID, w.made), from: from, to: to, amount: 1 + w.rng.Int64N(maxAmount)}
}

// attemptTransfer takes the keys of the pending transfer's two accounts,
// listed in a random order, makes the transfer under them and releases
// them.
func (w *worker) attemptTransfer(ctx, lctx context.Context, lc *redlock.Client, ttl time.Duration, s *section) (attemptOutcome, error) {
	if w.pending == nil {
		t := w.nextTransfer(s.attempt)
		w.pending = &t
	}
	t := *w.pending
	keys := []string{accountKey(t.from), accountKey(t.to)}
	w.rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	set, err := lc.LockAll(lctx, keys, ttl)
	if err != nil {
		return outcomeNotLocked, err
	}
	outcome, err := w.transferSection(ctx, set, t, s)
	s.heldNs = stampNs()
	_ = set.Release(context.WithoutCancel(ctx))
	s.releaseNs = stampNs()
	if outcome != outcomeRejected {
		w.pending = nil
	}
	return outcome, err
}

// transferSection is section for a transfer: the "locked" gate with the
// set's deadline (the earliest of its leases'), then the transfer.
func (w *worker) transferSection(ctx context.Context, set *redlock.LeaseSet, t transfer, s *section) (attemptOutcome, error) {
	s.gotNs = stampNs()
	from, to := leaseOf(set, accountKey(t.from)), leaseOf(set, accountKey(t.to))
	if from == nil || to == nil {
		return outcomeError, fmt.Errorf("chaos worker: the lease set on %s and %s lacks a key", accountKey(t.from), accountKey(t.to))
	}
	s.row, s.token, s.row2, s.token2, s.transfer = t.from, from.FencingToken(), t.to, to.FencingToken(), t.id
	deadline := s.gotNs + int64(time.Until(set.Deadline()))
	if err := w.gateAt(ctx, gateEvent{gate: gateLocked, attempt: s.attempt, token: s.token, deadline: deadline}); err != nil {
		return outcomeStopped, err
	}
	outcome, err := w.transferBody(ctx, t, from, to, s)
	s.endNs = stampNs()
	s.deadlineNs = s.endNs + int64(time.Until(set.Deadline()))
	return outcome, err
}

// leaseOf returns the lease of set on key, or nil.
func leaseOf(set *redlock.LeaseSet, key string) *redlock.Lease {
	for _, l := range set.Leases() {
		if l.Key() == key {
			return l
		}
	}
	return nil
}

// accountWrite is what a transfer writes on one account.
type accountWrite struct {
	id            int
	lease         *redlock.Lease
	balance, legs int64
}

// transferBody makes transfer t in the worker's fencing mode, in one
// transaction that also enters it in the ledger. The rows are written
// (and, in the fenced modes, claimed) in the order of their ids, so that
// two transactions on the same pair, a stale holder's and a newer one's,
// wait for each other instead of deadlocking.
//
//   - none: read both, write both, whatever the tokens.
//   - write-only: each write passes only if no newer token wrote the row
//     (Guard.Write in the transaction).
//   - claim-first: each row is stamped with its key's token before the
//     read (Guard.Claim, committed at once); the writes pass only while
//     both stamps are still the transfer's (Guard.WriteClaimed).
//   - fence-table: each account's fence-table row is claimed with its
//     key's token, the second inside the first's transaction
//     (FenceTable.InTx in FenceTable.InTx), and the transfer runs inside
//     both.
//
// A refusal of either row rolls back the whole transaction: the transfer
// is refused entirely.
func (w *worker) transferBody(ctx context.Context, t transfer, from, to *redlock.Lease, s *section) (attemptOutcome, error) {
	leases := map[int]*redlock.Lease{t.from: from, t.to: to}
	ids := []int{t.from, t.to}
	slices.Sort(ids)
	move := func(ctx context.Context, tx pgx.Tx, write func(ctx context.Context, tx pgx.Tx, a accountWrite) error) error {
		got, err := readAccounts(ctx, tx, ids, s)
		if err != nil {
			return err
		}
		if err := w.gate(ctx, gateRead, s.attempt, s.token); err != nil {
			return err
		}
		if err := w.work(ctx, from); err != nil {
			return err
		}
		for _, id := range ids {
			a := accountWrite{id: id, lease: leases[id], balance: got[id].balance, legs: got[id].legs + 1}
			if id == t.from {
				a.balance -= t.amount
			} else {
				a.balance += t.amount
			}
			if err := write(ctx, tx, a); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO transfers (id, worker, src, dst, amount, token_src, token_dst) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			t.id, w.cfg.ID, t.from, t.to, t.amount, int64(from.FencingToken()), int64(to.FencingToken()))
		return err
	}
	plain := func(ctx context.Context, tx pgx.Tx, a accountWrite) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = $1, legs = $2, last_token = $3 WHERE id = $4`,
			a.balance, a.legs, int64(a.lease.FencingToken()), a.id)
		return err
	}
	values := func(a accountWrite) fencing.Values {
		return fencing.Values{"balance": a.balance, "legs": a.legs, "last_token": int64(a.lease.FencingToken())}
	}
	switch w.cfg.Fencing {
	case "none":
		return verdictOf(pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error { return move(ctx, tx, plain) }))
	case "write-only":
		return verdictOf(pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			return move(ctx, tx, func(ctx context.Context, tx pgx.Tx, a accountWrite) error {
				return w.accounts.Write(ctx, tx, a.id, a.lease, values(a))
			})
		}))
	case "claim-first":
		for _, id := range ids {
			if err := w.accounts.Claim(ctx, w.pool, id, leases[id]); err != nil {
				return verdictOf(err)
			}
		}
		return verdictOf(pgx.BeginFunc(ctx, w.pool, func(tx pgx.Tx) error {
			return move(ctx, tx, func(ctx context.Context, tx pgx.Tx, a accountWrite) error {
				return w.accounts.WriteClaimed(ctx, tx, a.id, a.lease, values(a))
			})
		}))
	case "fence-table":
		lo, hi := ids[0], ids[1]
		return verdictOf(w.ft.InTx(ctx, w.pool, accountResource(lo), leases[lo], func(ctx context.Context, tx pgx.Tx) error {
			return w.ft.InTx(ctx, tx, accountResource(hi), leases[hi], func(ctx context.Context, tx pgx.Tx) error {
				return move(ctx, tx, plain)
			})
		}))
	}
	return outcomeError, errors.New("chaos worker: unknown fencing mode " + w.cfg.Fencing)
}

// accountState is an account as a transfer read it.
type accountState struct{ balance, legs int64 }

// readAccounts reads the accounts ids through tx into a map, noting in s
// when the read was sent and the first account's balance.
func readAccounts(ctx context.Context, tx pgx.Tx, ids []int, s *section) (map[int]accountState, error) {
	s.readNs = stampNs()
	rows, err := tx.Query(ctx, `SELECT id, balance, legs FROM accounts WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	got := map[int]accountState{}
	for rows.Next() {
		var id int
		var a accountState
		if err := rows.Scan(&id, &a.balance, &a.legs); err != nil {
			return nil, err
		}
		got[id] = a
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(got) != len(ids) {
		return nil, fmt.Errorf("chaos worker: accounts %v: %d found", ids, len(got))
	}
	s.read = got[s.row].balance
	return got, nil
}
