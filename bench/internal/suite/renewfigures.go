package suite

import (
	"cmp"
	"slices"
	"time"
)

// RenewStats are the renew scenarios' figures for one run (JSON "renew").
type RenewStats struct {
	Leases int `json:"leases"`
	Held   int `json:"held"` // leases held when the window began
	Lost   int `json:"lost"` // leases whose holder learned they were lost before the end
	// LostWhy says what ended the lost leases, most frequent first, and
	// when their holders learned it (absent when none was lost).
	LostWhy []LossCount `json:"lost_why,omitempty"`
	// RanOutAfterFn counts the Do leases held to the end of fn whose
	// validity ran out before their release went out: not lost (Do
	// returns fn's result), but their releases came late.
	RanOutAfterFn int     `json:"ran_out_after_fn"`
	WindowS       float64 `json:"window_s"`
	PeriodMs      float64 `json:"renew_period_ms"` // RenewPeriod(ttl)
	// Sent by the client, in the window: commands (a pipeline counts each),
	// per second, all nodes and per node.
	SentCmdsPerSec     float64   `json:"sent_cmds_per_sec"`
	SentCmdsPerSecNode []float64 `json:"sent_cmds_per_sec_node"`
	// Executed by the nodes, in the window, commands run inside scripts
	// included (INFO commandstats), per second; and per command name,
	// summed over the nodes.
	NodeCmdsPerSec     float64          `json:"node_cmds_per_sec"`
	NodeCmdsPerSecNode []float64        `json:"node_cmds_per_sec_node"`
	NodeCmds           map[string]int64 `json:"node_cmds"`
	// Round trips (a lone command or a pipeline) per node per renewal
	// period, and the largest of them.
	TripsPerPeriodNode []float64 `json:"round_trips_per_period_node"`
	TripsPerPeriodMax  float64   `json:"round_trips_per_period_max"`
	// Commands sent per lease per period, averaged over the nodes: 1 when
	// every lease is renewed with one command per node per period.
	CmdsPerLeasePeriod float64 `json:"cmds_per_lease_period"`
	// Commands the nodes executed (inside scripts included) per held lease
	// per renewal period, all five nodes together.
	NodeCmdsPerLeasePeriod float64 `json:"node_cmds_per_lease_period"`
	// CPU seconds per second of the window: this process (nil when it
	// cannot be measured here), and the five nodes together.
	ClientCPU *float64 `json:"client_cpu_s_per_s,omitempty"`
	NodesCPU  float64  `json:"nodes_cpu_s_per_s"`
	// Outside the window: commands sent, and executed by the nodes, while
	// the leases were being taken (and that phase's length) and while they
	// were given up.
	LockPhaseCmds        int64   `json:"lock_phase_sent_cmds"`
	LockPhaseNodeCmds    int64   `json:"lock_phase_node_cmds"`
	LockPhaseS           float64 `json:"lock_phase_s"`
	ReleasePhaseCmds     int64   `json:"release_phase_sent_cmds"`
	ReleasePhaseNodeCmds int64   `json:"release_phase_node_cmds"`
	ReleasePhaseS        float64 `json:"release_phase_s"`
	// The leases' keys the nodes still held just after the release phase
	// ended (a key counts once per node, so up to five per lease), and how
	// long after that end none was left (-1: not within the ttl and 5 s;
	// the releases that never went out leave their keys to expire).
	KeysLeftAfterRelease int64   `json:"keys_left_after_release"`
	KeysGoneAfterS       float64 `json:"keys_gone_after_s"`
	// What one held lease costs, from before the first was taken to when
	// all were held, divided by the leases held: the client's live heap
	// and goroutine stacks (after a GC; the goroutine that runs fn and
	// holds the lease is counted, as a caller of Do has it anyway), its
	// goroutines beyond that one, and the nodes' used_memory (all five).
	ClientBytesPerLease float64 `json:"client_bytes_per_lease"`
	// FnGoroutineBytes is what one goroutine that only waits costs, in
	// the same run (0 where no goroutine waits per lease), and
	// ClientBytesBeyondFn what the lease adds beyond it:
	// ClientBytesPerLease less FnGoroutineBytes. The growth of fn's
	// stack that taking and holding the lease causes is in the latter.
	FnGoroutineBytes    float64 `json:"fn_goroutine_bytes"`
	ClientBytesBeyondFn float64 `json:"client_bytes_per_lease_beyond_fn"`
	GoroutinesPerLease  float64 `json:"goroutines_per_lease_beyond_fn"`
	NodeBytesPerLease   float64 `json:"node_bytes_per_lease"`
}

// RenewFigures turns one run's raw counts into rates.
func RenewFigures(c renewCounts) RenewStats {
	r := RenewStats{Leases: c.leases, Held: c.held, Lost: c.lost, WindowS: c.window.Seconds(),
		PeriodMs: float64(c.period) / float64(time.Millisecond), NodeCmds: map[string]int64{},
		LockPhaseCmds: c.lockPhase.Cmds, LockPhaseNodeCmds: c.lockPhaseNode, LockPhaseS: c.lockPhaseTime.Seconds(),
		ReleasePhaseCmds: c.releasePhase.Cmds, ReleasePhaseNodeCmds: c.releasePhaseNode,
		ReleasePhaseS: c.releasePhaseTime.Seconds(), LostWhy: lossCounts(c.lostWhy), RanOutAfterFn: c.ranOutAfterFn,
		KeysLeftAfterRelease: c.keysLeft, KeysGoneAfterS: -1}
	if c.keysGone >= 0 {
		r.KeysGoneAfterS = c.keysGone.Seconds()
	}
	if c.held > 0 {
		h := float64(c.held)
		r.ClientBytesPerLease = float64(c.clientBytes) / h
		if c.fnBytes > 0 {
			r.FnGoroutineBytes = float64(c.fnBytes) / float64(c.leases)
		}
		r.ClientBytesBeyondFn = r.ClientBytesPerLease - r.FnGoroutineBytes
		r.GoroutinesPerLease = float64(c.goroutines-c.fnGoroutines) / h
		r.NodeBytesPerLease = float64(c.nodeBytes) / h
	}
	secs := c.window.Seconds()
	if secs <= 0 || c.period <= 0 {
		return r
	}
	periods := float64(c.window) / float64(c.period)
	var cmds int64
	for _, s := range c.sent {
		cmds += s.Cmds
		r.SentCmdsPerSecNode = append(r.SentCmdsPerSecNode, float64(s.Cmds)/secs)
		tp := float64(s.Trips) / periods
		r.TripsPerPeriodNode = append(r.TripsPerPeriodNode, tp)
		r.TripsPerPeriodMax = max(r.TripsPerPeriodMax, tp)
	}
	r.SentCmdsPerSec = float64(cmds) / secs
	if len(c.sent) > 0 && c.held > 0 {
		r.CmdsPerLeasePeriod = float64(cmds) / float64(len(c.sent)) / float64(c.held) / periods
	}
	var ncmds int64
	var cpu float64
	for _, s := range c.node {
		t := s.Total()
		ncmds += t
		r.NodeCmdsPerSecNode = append(r.NodeCmdsPerSecNode, float64(t)/secs)
		cpu += s.CPU
		for k, v := range s.Commands() {
			r.NodeCmds[k] += v
		}
	}
	r.NodeCmdsPerSec = float64(ncmds) / secs
	if c.held > 0 {
		r.NodeCmdsPerLeasePeriod = float64(ncmds) / float64(c.held) / periods
	}
	r.NodesCPU = cpu / secs
	if c.cpuOK {
		r.ClientCPU = ptr(c.clientCPU.Seconds() / secs)
	}
	return r
}

// LossCount is how many leases one reason ended, learned in one phase of
// the run: "taking" (before every lease was held), "window", or
// "release" (a release, once the window was over, found the lease gone).
type LossCount struct {
	Phase  string `json:"phase"`
	Reason string `json:"reason"`
	Count  int    `json:"count"`
}

// lossCounts lists m, most leases first, at most 10 reasons: the rest are
// summed into one.
func lossCounts(m map[lossKey]int) []LossCount {
	var out []LossCount
	for k, n := range m {
		out = append(out, LossCount{k.phase, k.reason, n})
	}
	slices.SortFunc(out, func(a, b LossCount) int {
		return cmp.Or(b.Count-a.Count, cmp.Compare(a.Phase, b.Phase), cmp.Compare(a.Reason, b.Reason))
	})
	if len(out) > 10 {
		rest := LossCount{Phase: "any", Reason: "other reasons"}
		for _, l := range out[10:] {
			rest.Count += l.Count
		}
		out = append(out[:10], rest)
	}
	return out
}
