package check

import (
	"cmp"
	"slices"
)

// PerRow splits the sections by the row (the lock key) they held: a
// section on two rows (a transfer) is in both lists, each time with the
// token of that row's own key as its Token and no second row, so that
// every check of this package can be run on one key's history at a time.
// The lists come in row order, each in the order of ss.
func PerRow(ss []Section) [][]Section {
	by := map[int][]Section{}
	for _, s := range ss {
		one := s
		one.Row2, one.Token2 = 0, 0
		by[s.Row] = append(by[s.Row], one)
		if s.Row2 != 0 {
			two := one
			two.Row, two.Token = s.Row2, s.Token2
			by[s.Row2] = append(by[s.Row2], two)
		}
	}
	rows := make([]int, 0, len(by))
	for r := range by {
		rows = append(rows, r)
	}
	slices.Sort(rows)
	out := make([][]Section, len(rows))
	for i, r := range rows {
		out[i] = by[r]
	}
	return out
}

// Transfer is one row of a transfers ledger: ID moved Amount from the
// account From to the account To.
type Transfer struct {
	ID       string
	From, To int
	Amount   int64
}

// Account is an account as the run left it: its opening balance, its
// final balance, and how many transfers its writers counted on it (each
// transfer writes the count it read plus one, so a write made from a
// stale read loses the count of every transfer it overwrote).
type Account struct {
	Opening, Balance int64
	Legs             int64
}

// TransferVerdict is what a ledger, the final accounts and the transfers
// the workers reported committed say together.
type TransferVerdict struct {
	// Lost: transfers a worker reported committed that the ledger lacks.
	Lost []string
	// Doubled: ids that are in the ledger more than once.
	Doubled []string
	// Mismatched: accounts whose final balance is not what replaying the
	// ledger from the opening balances gives.
	Mismatched []int
	// Drift is the final total minus the opening total: money made or
	// destroyed (transfers only move it).
	Drift int64
	// LostLegs is, summed over the accounts, the ledger's transfers on
	// the account minus the count its writers left on it: transfers whose
	// write on the account a stale write overwrote (negative when a
	// transfer was applied to an account more often than it is in the
	// ledger).
	LostLegs int64
}

// Transfers checks a transfers run: every transfer reported committed is
// in the ledger, no id is in it twice, the total is what it was, and the
// ledger replayed from the opening balances gives exactly the final ones.
func Transfers(accounts map[int]Account, ledger []Transfer, reported []string) TransferVerdict {
	var v TransferVerdict
	seen := make(map[string]int, len(ledger))
	replay := make(map[int]int64, len(accounts))
	legs := make(map[int]int64, len(accounts))
	for id, a := range accounts {
		replay[id] = a.Opening
		v.Drift += a.Balance - a.Opening
	}
	for _, t := range ledger {
		seen[t.ID]++
		if seen[t.ID] == 2 {
			v.Doubled = append(v.Doubled, t.ID)
		}
		replay[t.From] -= t.Amount
		replay[t.To] += t.Amount
		legs[t.From]++
		legs[t.To]++
	}
	for _, id := range reported {
		if seen[id] == 0 {
			v.Lost = append(v.Lost, id)
		}
	}
	// A ledger row on an account that does not exist leaves its other
	// account off the replay, so it is found too.
	for id, a := range accounts {
		if replay[id] != a.Balance {
			v.Mismatched = append(v.Mismatched, id)
		}
		v.LostLegs += legs[id] - a.Legs
	}
	slices.Sort(v.Mismatched)
	slices.SortFunc(v.Lost, cmp.Compare[string])
	return v
}
