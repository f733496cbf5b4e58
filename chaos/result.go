package chaos

import (
	"fmt"
	"strings"
	"time"
)

// Result is one run in the JSON report.
type Result struct {
	Topology   string  `json:"topology"`
	Fault      string  `json:"fault"`
	Fencing    string  `json:"fencing"`
	Seed       uint64  `json:"seed"`
	Repeat     int     `json:"repeat,omitempty"`
	Workers    int     `json:"workers"`
	TTLms      int64   `json:"ttl_ms"`
	WorkMs     int64   `json:"work_ms"`
	StallRate  float64 `json:"stall_rate"`
	PollMs     int64   `json:"poll_ms,omitempty"` // waiters polled TryLock this often (0: Lock)
	Quarantine bool    `json:"quarantine"`

	Sections        int            `json:"sections"` // critical sections entered (lock granted)
	Accepted        int            `json:"accepted"` // increments committed
	Expected        int64          `json:"expected"` // what the counter should read
	Final           int64          `json:"final"`    // what it reads
	LostUpdates     int64          `json:"lost_updates"`
	Overlaps        int            `json:"overlaps"`       // valid leases that coexisted
	ValidOverlaps   int            `json:"valid_overlaps"` // the same, each lease's window taken up to its release
	StaleOverlaps   int            `json:"stale_overlaps"` // sections that overlapped at the resource, valid or not
	Rejected        int            `json:"rejected"`       // stale writes refused by fencing (then redone)
	LateSections    int            `json:"late_sections"`  // sections that ended after their lease deadline
	Late            []string       `json:"late,omitempty"`
	LateWrites      int            `json:"late_writes"`             // late sections whose write was accepted
	LateOverwritten int            `json:"late_writes_overwritten"` // of those, writes no later section read
	ReadWriteShare  float64        `json:"read_write_share"`        // share of the run the counter sat between a read and its write
	TokenInversions int            `json:"token_inversions"`        // writes the resource accepted with a token not above an earlier one
	GrantInversions int            `json:"grant_token_inversions"`  // grants with a token not above an earlier grant's
	Linearizable    string         `json:"linearizable"`            // porcupine on the lock history: ok, violation, unknown
	LockFailures    int            `json:"lock_failures"`
	SectionErrors   int            `json:"section_errors,omitempty"` // sections that ended in an error, neither written nor refused
	SectionError    string         `json:"section_error,omitempty"`  // the last such error a worker saw
	Polls           int            `json:"polls,omitempty"`          // TryLock refusals the polling waiters slept after
	DuringFault     int            `json:"granted_during_fault"`
	BlockedMs       int64          `json:"blocked_ms,omitempty"`
	WaitMedianMs    int64          `json:"lock_wait_median_ms"` // from the lock call to the grant, over the sections
	WaitMaxMs       int64          `json:"lock_wait_max_ms"`
	Error           string         `json:"error,omitempty"` // the lock error the fault produced, if any
	ErrorLatencyMs  int64          `json:"error_latency_ms,omitempty"`
	DurationMs      int64          `json:"duration_ms"`
	Schedule        []string       `json:"schedule,omitempty"`
	FaultCounts     map[string]int `json:"fault_counts,omitempty"` // faults injected, by kind (nemesis)
	// Unfenced is the counter row the nemesis's unfenced clients write
	// (lost updates there are not fencing's to prevent).
	Unfenced *UnfencedRow `json:"unfenced_row,omitempty"`
	// Nemesis is what the nemesis's mixed clients did, per worker.
	Nemesis []NemesisWorker `json:"nemesis_workers,omitempty"`
	// Style is how the workers took the lock, where not with Lock on the
	// counter's key: "election" or "transfers".
	Style string `json:"style,omitempty"`
	// Transfers is the ledger's verdict of a transfers run.
	Transfers *TransferResult `json:"transfers,omitempty"`

	Expect  string   `json:"expect"`
	Pass    bool     `json:"pass"`
	Failure []string `json:"failures,omitempty"`

	judged []string // what the fault's own judge found wrong
}

// UnfencedRow is the counter row written without fencing.
type UnfencedRow struct {
	Accepted    int64 `json:"accepted"`
	Final       int64 `json:"final"`
	LostUpdates int64 `json:"lost_updates"`
}

// TransferResult is what a transfers run's ledger shows. In such a run
// the measures of the sections (overlaps, token inversions, ...) are
// taken per account key and summed, rejected counts transfers refused as
// stale, and lost_updates counts transfer legs (one account's part of a
// transfer) whose write on the account a stale write overwrote.
type TransferResult struct {
	Accounts  int `json:"accounts"`
	Committed int `json:"committed"` // rows in the transfers table
	Reported  int `json:"reported"`  // transfers the workers reported committed
	// Lost are transfers a worker reported committed that the table
	// lacks; Doubled, ids the table holds more than once.
	Lost    int `json:"lost_transfers"`
	Doubled int `json:"doubled_transfers"`
	// Mismatched are accounts whose final balance is not what the table,
	// replayed from the opening balances, gives; Drift is the final total
	// minus the opening total (transfers only move money).
	Mismatched int   `json:"mismatched_accounts"`
	Drift      int64 `json:"balance_drift"`
	// Examples of what went wrong, a few of each.
	LostIDs    []string `json:"lost_ids,omitempty"`
	DoubledIDs []string `json:"doubled_ids,omitempty"`
}

// evaluate checks the run against what its scenario must show.
func (r *Result) evaluate(e Expect, runErr error) {
	r.Expect = e.Describe()
	var f []string
	if runErr != nil {
		f = append(f, "run failed: "+oneLine(runErr))
	}
	if err := e.Overlaps.check("overlaps", r.Overlaps); err != nil {
		f = append(f, err.Error())
	}
	if err := e.Lost.check("lost updates", int(r.LostUpdates)); err != nil {
		f = append(f, err.Error())
	}
	if e.Granted && r.DuringFault == 0 {
		f = append(f, "no lock was granted while the fault was active")
	}
	if e.Ungranted && r.DuringFault != 0 {
		f = append(f, fmt.Sprintf("%d sections were granted while the fault was active", r.DuringFault))
	}
	if e.NoQuorum {
		if r.Sections != 0 {
			f = append(f, fmt.Sprintf("%d sections granted without a quorum", r.Sections))
		}
		if !strings.Contains(r.Error, "no quorum") {
			f = append(f, fmt.Sprintf("error does not name the missing quorum: %q", r.Error))
		}
	}
	blocked := time.Duration(r.BlockedMs) * time.Millisecond
	if e.MaxBlock > 0 && (r.BlockedMs <= 0 || blocked > e.MaxBlock) {
		f = append(f, fmt.Sprintf("others were blocked %d ms by the holder, want <= %v", r.BlockedMs, e.MaxBlock))
	}
	if e.MinBlock > 0 && blocked < e.MinBlock {
		f = append(f, fmt.Sprintf("others were blocked %d ms by the holder, want >= %v", r.BlockedMs, e.MinBlock))
	}
	if e.Rejection && r.Rejected == 0 {
		msg := "the stale writer was never rejected"
		if r.SectionErrors > 0 {
			msg += fmt.Sprintf(" (%d sections ended in an error instead; the last: %s)", r.SectionErrors, r.SectionError)
		}
		f = append(f, msg)
	}
	if r.TokenInversions > 0 && r.Fencing != "none" {
		// A fenced resource must never accept an older token.
		f = append(f, fmt.Sprintf("%d writes accepted with an older token", r.TokenInversions))
	}
	f = append(f, r.Transfers.failures(e)...)
	f = append(f, r.judged...)
	r.Failure, r.Pass = f, len(f) == 0
}

// Report is the whole JSON report.
type Report struct {
	Profile    string    `json:"profile"`
	Backend    string    `json:"backend"`
	Seed       uint64    `json:"seed"`
	Started    time.Time `json:"started"`
	DurationMs int64     `json:"duration_ms"`
	Runs       []Result  `json:"runs"`
	// Comparisons puts the runs that repeat the published experiment
	// next to its figures (full profile, no fencing).
	Comparisons []Comparison `json:"published_comparison,omitempty"`
}

// FailedComparisons returns the judged comparisons whose median missed
// the published one by more than PublishedTolerance.
func (r *Report) FailedComparisons() []Comparison {
	var out []Comparison
	for _, c := range r.Comparisons {
		if c.Judged() && c.Verdict != "ok" {
			out = append(out, c)
		}
	}
	return out
}

// Failed returns the runs that did not show what they must.
func (r *Report) Failed() []Result {
	var out []Result
	for _, x := range r.Runs {
		if !x.Pass {
			out = append(out, x)
		}
	}
	return out
}

// failures is what a transfers run's ledger shows wrong: a transfer
// reported but lost, or entered twice, whatever the fencing (the worker
// enters a transfer in the transaction that makes it, and makes again
// only one that was refused); no transfer at all; and, where the run
// must lose nothing, money made or destroyed and balances the ledger does
// not explain. nil for a run of another style.
func (t *TransferResult) failures(e Expect) []string {
	if t == nil {
		return nil
	}
	var f []string
	if t.Lost > 0 {
		f = append(f, fmt.Sprintf("%d transfers reported committed are not in the ledger (%s)", t.Lost, strings.Join(t.LostIDs, ", ")))
	}
	if t.Doubled > 0 {
		f = append(f, fmt.Sprintf("%d transfers are in the ledger more than once (%s)", t.Doubled, strings.Join(t.DoubledIDs, ", ")))
	}
	if t.Committed == 0 {
		f = append(f, "no transfer was committed")
	}
	if e.Lost == Zero && (t.Drift != 0 || t.Mismatched != 0) {
		f = append(f, fmt.Sprintf("balances: total off by %d, %d of %d accounts differ from the ledger's replay", t.Drift, t.Mismatched, t.Accounts))
	}
	return f
}
