package chaos

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// ledger is what a transfers run left in its database besides its
// sections: the accounts, the transfers table, the transfers the workers
// reported committed (their sections' outcome), and every balance write
// the accounts accepted, with its token, in commit order per account.
type ledger struct {
	accounts map[int]check.Account
	entries  []check.Transfer
	reported []string
	writes   map[int][]uint64
}

// readLedger reads a finished transfers run's ledger from the database at
// dsn.
func readLedger(ctx context.Context, dsn string) (*ledger, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("chaos: read the ledger: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	l := &ledger{accounts: map[int]check.Account{}, writes: map[int][]uint64{}}
	rows, _ := conn.Query(ctx, `SELECT id, opening, balance, legs FROM accounts`)
	var id int
	var a check.Account
	if _, err := pgx.ForEachRow(rows, []any{&id, &a.Opening, &a.Balance, &a.Legs}, func() error {
		l.accounts[id] = a
		return nil
	}); err != nil {
		return nil, fmt.Errorf("chaos: read the accounts: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT id, src, dst, amount FROM transfers ORDER BY seq`)
	var t check.Transfer
	if _, err := pgx.ForEachRow(rows, []any{&t.ID, &t.From, &t.To, &t.Amount}, func() error {
		l.entries = append(l.entries, t)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("chaos: read the transfers: %w", err)
	}
	// The report goes through the sections table, written after the
	// transfer's commit returned and apart from it.
	rows, _ = conn.Query(ctx, `SELECT transfer FROM sections WHERE transfer <> '' AND outcome = $1`, check.OutcomeOK.String())
	var x string
	if _, err := pgx.ForEachRow(rows, []any{&x}, func() error {
		l.reported = append(l.reported, x)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("chaos: read the reported transfers: %w", err)
	}
	rows, _ = conn.Query(ctx, `SELECT account, token FROM account_writes ORDER BY seq`)
	var tok int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &tok}, func() error {
		l.writes[id] = append(l.writes[id], uint64(tok))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("chaos: read the balance writes: %w", err)
	}
	return l, nil
}
