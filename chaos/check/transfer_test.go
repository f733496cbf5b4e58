package check

import (
	"slices"
	"testing"
)

// TestPerRow: a transfer's section counts on both of its accounts' keys,
// each time with that key's token, so two transfers that share one
// account overlap on that key alone, and transfers on disjoint accounts
// do not overlap at all.
func TestPerRow(t *testing.T) {
	sec := func(w, a, b int, ta, tb uint64, got, end int64) Section {
		return Section{Worker: w, Row: a, Token: ta, Row2: b, Token2: tb, Call: got - 1, Got: got, End: end, Deadline: end + 100, Release: end + 1, Outcome: OutcomeOK}
	}
	ss := []Section{sec(0, 1, 2, 10, 20, 10, 50), sec(1, 2, 3, 21, 30, 30, 60), sec(2, 4, 5, 40, 50, 30, 60)}
	rows := PerRow(ss)
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5: %+v", len(rows), rows)
	}
	overlaps := 0
	for _, r := range rows {
		overlaps += Overlaps(r)
	}
	if overlaps != 1 || Overlaps(rows[1]) != 1 {
		t.Errorf("overlaps per row %d (row 2: %d), want 1 on row 2 only", overlaps, Overlaps(rows[1]))
	}
	var tokens []uint64
	for _, s := range rows[1] {
		if s.Row != 2 || s.Row2 != 0 || s.Token2 != 0 {
			t.Errorf("row 2's list holds %+v", s)
		}
		tokens = append(tokens, s.Token)
	}
	if !slices.Equal(tokens, []uint64{20, 21}) {
		t.Errorf("row 2's tokens %v, want each key's own: [20 21]", tokens)
	}
	// Inverted tokens on one key show up on that key's list.
	ss[1].Token = 19
	if inv := GrantInversions(PerRow(ss)[1]); inv != 1 {
		t.Errorf("grant inversions on row 2: %d, want 1", inv)
	}
}

// TestTransfers: a clean ledger passes; each kind of damage is found by
// the check made for it.
func TestTransfers(t *testing.T) {
	ledger := []Transfer{{"a", 1, 2, 30}, {"b", 2, 3, 5}, {"c", 3, 1, 10}}
	clean := func() map[int]Account {
		return map[int]Account{
			1: {Opening: 100, Balance: 80, Legs: 2},
			2: {Opening: 100, Balance: 125, Legs: 2},
			3: {Opening: 100, Balance: 95, Legs: 2},
		}
	}
	if v := Transfers(clean(), ledger, []string{"a", "b", "c"}); len(v.Lost)+len(v.Doubled)+len(v.Mismatched) != 0 || v.Drift != 0 || v.LostLegs != 0 {
		t.Errorf("clean run: %+v", v)
	}
	// Reported but not in the ledger; a ledger row nobody reported (a
	// worker that died before it could) is no loss.
	if v := Transfers(clean(), ledger, []string{"a", "c", "x"}); !slices.Equal(v.Lost, []string{"x"}) {
		t.Errorf("lost: %v, want [x]", v.Lost)
	}
	// One transfer applied and entered twice.
	twice := clean()
	twice[1], twice[2] = Account{Opening: 100, Balance: 50, Legs: 3}, Account{Opening: 100, Balance: 155, Legs: 3}
	if v := Transfers(twice, append(ledger, Transfer{"a", 1, 2, 30}), nil); !slices.Equal(v.Doubled, []string{"a"}) || len(v.Mismatched) != 0 {
		t.Errorf("doubled: %+v, want [a] and balances that match the ledger", v)
	}
	// A stale holder of accounts 1 and 3 wrote what it read before "c":
	// c's effect and count are gone from both, money is made.
	stale := clean()
	stale[1] = Account{Opening: 100, Balance: 70, Legs: 1}
	stale[3] = Account{Opening: 100, Balance: 105, Legs: 1}
	v := Transfers(stale, ledger, nil)
	if !slices.Equal(v.Mismatched, []int{1, 3}) || v.Drift != 0 || v.LostLegs != 2 {
		t.Errorf("stale write: %+v, want accounts 1 and 3 mismatched, drift 0, 2 lost legs", v)
	}
	stale[3] = Account{Opening: 100, Balance: 95, Legs: 2}
	if v := Transfers(stale, ledger, nil); !slices.Equal(v.Mismatched, []int{1}) || v.Drift != -10 || v.LostLegs != 1 {
		t.Errorf("one leg overwritten: %+v, want account 1, drift -10, 1 lost leg", v)
	}
	// Half of "a" committed on its own (account 1 only), then "a" made
	// again whole: account 1 paid twice, and counts one transfer more
	// than the ledger gives it.
	half := clean()
	half[1] = Account{Opening: 100, Balance: 50, Legs: 3}
	if v := Transfers(half, ledger, nil); !slices.Equal(v.Mismatched, []int{1}) || v.Drift != -30 || v.LostLegs != -1 {
		t.Errorf("half a transfer: %+v, want account 1 off, drift -30, -1 lost legs", v)
	}
	if v := Transfers(clean(), append(ledger, Transfer{"d", 1, 9, 1}), nil); !slices.Equal(v.Mismatched, []int{1}) {
		t.Errorf("a transfer to a missing account: %+v, want account 1 off the replay", v)
	}
}
