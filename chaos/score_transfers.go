package chaos

import (
	"time"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// scoreTransfers replaces the counter's measures of r, which score
// filled in, by a transfers run's: the sections' checks per account key
// (a transfer's section counts on both of its keys, with each key's own
// token), token order per account, and the ledger's verdict.
func (r *Result) scoreTransfers(h *history, l *ledger) {
	v := check.Transfers(l.accounts, l.entries, l.reported)
	r.Transfers = &TransferResult{
		Accounts: len(l.accounts), Committed: len(l.entries), Reported: len(l.reported),
		Lost: len(v.Lost), Doubled: len(v.Doubled), Mismatched: len(v.Mismatched), Drift: v.Drift,
		LostIDs: firstFew(v.Lost), DoubledIDs: firstFew(v.Doubled),
	}
	r.Accepted = len(l.reported)
	r.Expected = int64(2 * len(l.entries))
	r.Final = 0
	for _, a := range l.accounts {
		r.Final += a.Legs
	}
	r.LostUpdates = v.LostLegs
	r.Unfenced = nil // score took the sections on account 2 for the nemesis's unfenced row

	r.Overlaps, r.ValidOverlaps, r.StaleOverlaps, r.GrantInversions = 0, 0, 0, 0
	r.Linearizable = "ok"
	for _, ss := range check.PerRow(h.sections) {
		r.Overlaps += check.Overlaps(ss)
		r.ValidOverlaps += check.ValidOverlaps(ss)
		r.StaleOverlaps += check.StaleOverlaps(ss)
		r.GrantInversions += check.GrantInversions(ss)
		switch check.Linearizable(ss, 20*time.Second) {
		case "violation":
			r.Linearizable = "violation"
		case "unknown":
			if r.Linearizable == "ok" {
				r.Linearizable = "unknown"
			}
		}
	}
	r.TokenInversions = 0
	for _, tokens := range l.writes {
		r.TokenInversions += check.TokenInversions(tokens)
	}
	// The counter's split of late writes does not apply to balances:
	// count the late transfers that were committed, and no more.
	r.LateWrites, r.LateOverwritten, r.ReadWriteShare = 0, 0, 0
	for _, s := range h.sections {
		if s.Outcome == check.OutcomeOK && s.End > s.Deadline {
			r.LateWrites++
		}
	}
}

// firstFew is up to five of ids.
func firstFew(ids []string) []string {
	if len(ids) > 5 {
		return ids[:5]
	}
	return ids
}
