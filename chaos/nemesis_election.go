package chaos

import (
	"fmt"
	"time"
)

// The election nemesis: every worker is a candidate in one election
// (redlock/election) under the nemesis's faults, worker freezes (SIGSTOP,
// a leader frozen past its lease) among them. A leadership is a lease kept renewed
// whose token is the term, so the run's safety checks are the election's:
// no two leaderships valid at once, terms that only grow at the grant and
// at the resource, no lost update of the row the leaders increment.

func init() {
	register(&fault{
		name: "nemesis-election",
		rank: 230,
		doc: "every worker a candidate in one leader election (Campaign, lead, resign), leaders frozen now and then, " +
			"under the nemesis's restarts, pauses, partitions and slow links: at most one valid leader at a time, terms only grow",
		topologies: []string{Redlock5},
		runs:       map[string][]Scenario{"soak": {electionRun(time.Minute)}},
		worker:     electionWorker,
		script:     nemesisWith(nemesisKinds),
		judge:      judgeElection,
	})
}

// electionCandidates is how many workers campaign.
const electionCandidates = 5

// electionRun is an election nemesis run of duration d; the leaders share
// counter row 1 under claim-first.
func electionRun(d time.Duration) Scenario {
	s := newRun(Redlock5, "claim-first", electionCandidates, 1, Expect{Overlaps: Zero, Lost: Zero, Granted: true})
	s.Duration, s.TTL = d, nemesisTTL
	return s
}

// electionWorker makes worker w a candidate: each leadership lasts about
// half a ttl of work, and 3% of them one to two ttls more, renewed
// meanwhile by the Client.
func electionWorker(_ int, cfg *workerConfig) {
	cfg.Style = styleElection
	cfg.WorkMs = cfg.TTLms / 2
	cfg.StallRate, cfg.StallMin, cfg.StallMax = 0.03, cfg.TTLms, cfg.TTLms*2
}

// electionClients names the candidates in the report.
var electionClients = []nemesisClient{{name: "candidate", apply: func(time.Duration, *workerConfig) {}}}

// judgeElection: the safety verdicts, and more than one candidate led
// (the line hands the leadership on).
func judgeElection(e *env, r *Result, h *history, stats []*workerStats) []string {
	bad := safetyVerdicts(r)
	bad = append(bad, judgeWorkers(e, r, h, stats, electionClients, func(int, nemesisClient, *workerStats, NemesisWorker) string { return "" })...)
	led := 0
	for _, nw := range r.Nemesis {
		if nw.Granted > 0 {
			led++
		}
	}
	if led < 2 {
		bad = append(bad, fmt.Sprintf("%d of %d candidates led, want at least 2", led, len(r.Nemesis)))
	}
	return bad
}
