package model

import (
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Unit is the length of one model tick. A tick is the smallest step of
// every clock, and the drift factors below are chosen so that the drift
// margin of a lease is a whole tick or more: the model's clocks can then
// disagree by as much as the protocol allows, and no more.
const Unit = time.Second

// maxNodes bounds Config.Nodes (node sets are bit masks in a byte).
const maxNodes = 7

// ClientConfig is one client of the deployment: what a redlock.Client
// built with these options does, one TryLock at a time.
type ClientConfig struct {
	TTL    time.Duration // each lease's ttl
	MaxTTL time.Duration // WithMaxTTL: part of the settings σ, sets the quarantine
	Factor float64       // WithDriftFactor
	// Fencing mints a token with every lease (WithFencing).
	Fencing bool
	// NoQuarantine is the lab switch labopt.WithoutRestartQuarantine: the acquire script is
	// sent without settings and skips the admission check.
	NoQuarantine bool
	// Attempts is how many TryLock calls the client makes in a run.
	Attempts int
	// Extends is how many Lease.Extend calls (each with the lease's ttl)
	// the client may make per lease.
	Extends int
	// Servers maps the client's node list to the nodes: entry i reaches
	// node Servers[i] (nil: entry i is node i). An entry repeated is one
	// server listed twice (identity.go). The list may be shorter than the
	// deployment's nodes (a client of an old or a new node list around a
	// reconfiguration); its length is part of the settings σ.
	Servers []int
	// Probed, with Servers: the entries verified at the start, as New's
	// probe leaves them when it heard those entries and not the others
	// (which must then be proven by a proof round, see identity.go). nil:
	// every entry is verified (distinct servers, all heard by New).
	Probed []int
	// Holds: the client never releases a lease, it keeps it until it is
	// over (a bound, like Wipes: fewer runs).
	Holds bool
	// AfterReconfigure: a client the operator starts with new settings
	// once a reconfiguration to them said its step 1 was done (the old
	// settings refused, the new nodes marked; docs/cli.md,
	// "reconfigure"): it takes no step before (reconfigure.go).
	AfterReconfigure bool
	// Repoint, when set, is {entry, node}: at any moment after New (once
	// in a run) the client's entry is re-pointed to that node, as a proxy
	// or a DNS name is re-pointed to another server and go-redis
	// reconnects (identity.go). Every call the entry sends from then on,
	// and every call still waiting for a connection, reaches the node.
	Repoint []int
	// Keys, two or more: the client is a LockAll over these keys, listed
	// in this order (multikey.go). The model runs it as one client per
	// key, its parts, in the order it takes them; Attempts and Extends
	// are then per key. nil: the client locks the one key of the
	// single-key scenarios.
	Keys []string
	// Key is the key a client that is no LockAll locks ("": the one key
	// of the single-key scenarios), so that a single lease can contend
	// with a LockAll for one of its keys.
	Key string

	// A part of a LockAll, as newMachine expands it: its key, its
	// LockAll (1 + the index, 0: none) and its place in the order the
	// keys are taken.
	key      string
	set, pos int
}

// entries is the length of the client's node list.
func (cc ClientConfig) entries(nodes int) int {
	if len(cc.Servers) > 0 {
		return len(cc.Servers)
	}
	return nodes
}

// Config is one exploration: the deployment, the clients, the faults
// allowed, the bounds, and the defects to put back in (patches to the
// scripts' text, switches of the client's rules) to show that the
// explorer finds them.
type Config struct {
	Nodes   int
	Clients []ClientConfig
	// Admitted: every node of Clients[0]'s list starts admitted with its
	// settings (a deployment in use, after Bootstrap or a quarantine).
	Admitted bool
	// Keys are string keys some nodes start with (node -> key -> value),
	// written before Admitted's markers: a state an earlier operator
	// action left, such as a finished reconfiguration's markers and
	// traces.
	Keys map[int]map[string]string
	// Confirm runs the admission as admission.go's check does (see
	// confirm.go): the pending script, then, once it reads the quarantine
	// over, the peers' check (confirm) and the admit script; a node held
	// off by a reconfiguration to the client's settings is finished
	// instead, and a node met under other settings stops the client's
	// admissions (its conflict). Without it the admit script is sent at
	// any moment after the pending one, with no peers' check.
	Confirm bool
	// BootClient is the client whose settings and node list the Bootstrap
	// runs use (its option AfterReconfigure holds them back too): a client
	// that calls Bootstrap at every start.
	BootClient int
	// Reconfigs are the Client.Reconfigure runs the operator may start
	// (reconfigure.go), ReconfigRuns how many in all, one at a time:
	// reruns and stale runs are runs drawn from the same set.
	Reconfigs    []Reconfig
	ReconfigRuns int
	// ReconfigInOrder: run k uses Reconfigs[k] (k < len(Reconfigs)), a
	// bound like Wipes, so that a scenario of a given sequence of runs
	// can be explored deeper.
	ReconfigInOrder bool
	// ExclusionOnly checks mutual exclusion without the keys invariant,
	// which finds most defects a few steps before they become a double
	// grant: to show the double grant itself.
	ExclusionOnly bool
	// LiveReconfig checks the bounded liveness of a reconfiguration: see
	// machine.reconfigLiveness.
	LiveReconfig bool
	// The reconfiguration's guards, each taken out to show the defect it
	// prevents (known.go): NoJoinMarks, step 1 marks no new node that is
	// not an old one; NoChangeRecord, a run moves any node that carries a
	// reconfiguration's marks, and the new settings when a change from
	// its old settings wrote them (the rule before change records; the
	// scenario patches reconfigure.lua's check out too); RecordWithoutNodes,
	// the change record names no new node; FinishedOnMarks, a run takes
	// a new node only marked "reconfiguring to" the new settings for one
	// that carries them, and finds the change already done;
	// OldFromMarks, a run that reads the old settings reads a node a
	// change marked ("reconfiguring to", "retired") as carrying the
	// settings its marker names, not the change record's old ones.
	NoJoinMarks, NoChangeRecord, RecordWithoutNodes, FinishedOnMarks, OldFromMarks bool

	// Skew is how many ticks any clock may run ahead of real time over a
	// whole run. Clocks only run ahead, so any two clocks measure any
	// interval within Skew ticks of each other: assumption 1 of
	// docs/protocol.md with the rate error f·ttl + 2 ms of every lease
	// at least Skew ticks (checked by New).
	Skew int
	// SkewedNodes bounds how many node clocks may run ahead in a run (0:
	// every one), as Wipes bounds the data losses.
	SkewedNodes int
	// ClientSkew is the same for the clients' clocks (0 runs them at the
	// rate of real time). A client clock that runs ahead of the nodes
	// ends its trust sooner, so Skew on the nodes alone already gives the
	// unsafe direction of every pair (a node ahead of a client); the
	// clients' own skew adds the safe one, and the interplay of two
	// clients' clocks, at a cost in states.
	ClientSkew int
	// MaxTime bounds real time, in ticks.
	MaxTime int
	// Wipes bounds the data losses (FLUSHALL, a restart without
	// persistence) in a run; a loss keeps the server's identity (see
	// wiped). (Lost replies need no bound: a reply that is never
	// delivered is a lost one.)
	Wipes int
	// Pendings bounds the pending calls (quarantine starts) each client
	// sends in a run.
	Pendings int
	// Bootstraps bounds the runs of Client.Bootstrap an operator makes,
	// with the settings of Clients[0] (bootstrap.go).
	Bootstraps int
	// Proofs bounds the identity proof rounds each client takes
	// (identity.go).
	Proofs int
	// RepliesAtOnce: every reply that is read arrives in the step its
	// node runs the call, none is delayed or lost (calls still wait on
	// the wire as long as any run). NoGiveUps: no client gives up an
	// attempt it has not decided (no timeout). Both are bounds, like
	// Wipes: fewer runs, so that a scenario can be explored deeper.
	RepliesAtOnce bool
	NoGiveUps     bool
	// Prefix starts every run with these steps, each the first successor
	// whose words contain the string: a reachable state (an earlier
	// operator action, say) from which the exploration goes on, so that
	// a scenario reaches deeper than its search could alone. Its steps
	// are the first of every trace, and count in Depth.
	Prefix []string
	// Depth bounds the steps of a run.
	Depth int
	// DFS explores depth first (see Explore).
	DFS bool
	// Workers expand each breadth-first level's states on this many
	// goroutines (0 or 1: on the caller's). The states are taken in the
	// same order, so the result is the same for any number.
	Workers int
	// Symmetry keeps one state of those that differ only by a renaming
	// of the nodes.
	Symmetry bool
	// MaxStates stops the exploration after this many states (0: no
	// limit); the result then says it was cut short.
	MaxStates int

	// Patches rewrite a script's Lua text, by script name, before it is
	// compiled: a defect put back in to show that the explorer finds it.
	Patches map[string]func(string) string
	// DeadlineFromEnd counts a lease's deadline from the end of its round
	// instead of its start (a defect; docs/protocol.md, "Deadlines count
	// from the start of their round").
	DeadlineFromEnd bool
	// NoDrift leaves the drift out of validity (a defect).
	NoDrift bool
	// NoLapseCheck counts an extend round decided after the lease's
	// deadline, moving the deadline forward (a defect once an extend
	// may re-create a key: docs/protocol.md, "Extends re-create what a
	// restart lost"). NoRecreate names no entry for re-creation (the
	// extend before re-creation).
	NoLapseCheck, NoRecreate bool
	// Live checks the bounded liveness property in every state reached:
	// see machine.liveness (and machine.setLiveness for LockAll's parts).
	Live bool
	// LockAll's guards, each taken out to show the defect it prevents
	// (multikey.go): NoCanonicalOrder, a LockAll takes its keys in the
	// order they were listed, not in sorted byte order; SetDeadlineFromLast,
	// the set is trusted until the deadline of the last key taken, not the
	// earliest of its keys'; KeepPartialHolds, a LockAll that gives up
	// releases none of the keys it took (its attempt in progress is still
	// cleaned up).
	NoCanonicalOrder, SetDeadlineFromLast, KeepPartialHolds bool
	// CheckLeftovers checks that a LockAll that gave up or released its
	// set leaves none of its values on a node once every call it sent
	// has run (machine.leftovers). It needs no time to pass (MaxTime 0):
	// with time, a late acquire may run after the tombstone its release
	// left there expired and set a key that expires with its ttl, which
	// the design allows.
	CheckLeftovers bool
	// ClockJumps lifts assumption 1: node clocks may run ahead by more
	// than the drift of a lease (Skew is then not checked against it), so
	// two holders may overlap, and the invariants are only those that use
	// no clock: the fencing tokens' (Theorems 1 and 2 of docs/protocol.md).
	ClockJumps bool
	// BootstrapIgnoresMarkers: Bootstrap counts no node admitted with its
	// settings as a sign of use, and claims and admits the nodes it found
	// bare while others carry the marker (a defect: the old Bootstrap,
	// which admitted every bare node and left the admitted ones as they
	// were).
	BootstrapIgnoresMarkers bool
	// BootAfterPending starts Bootstrap only once a node carries a
	// pending mark: a client tried the deployment first, as one almost
	// always has in a deployment in use. BootstrapAdmitsPending: a
	// pending mark is no sign of use, and the claim takes it over (a
	// defect: Bootstrap admitting a deployment where no node is admitted
	// but a quarantine is in progress).
	BootAfterPending, BootstrapAdmitsPending bool
	// NoIdentityCheck counts every entry's replies as votes from the
	// start, with no identity proof (a defect).
	NoIdentityCheck bool
	// ProofIgnoresMissing verifies the entries that answered a proof
	// round even when a verified entry did not (a defect: that entry may
	// be one of them under another name).
	ProofIgnoresMissing bool
	// NoReplyIdentity counts a verified entry's replies whatever server
	// sent them (a defect, I1: an entry proven once and never again, so
	// one re-pointed to another entry's server counts it twice).
	NoReplyIdentity bool
}

// settings is σ, as redlock's deployment.go writes it: the string the
// nodes compare. The model writes it itself (the library keeps it
// unexported); only equality matters to the scripts.
func (cc ClientConfig) settings(nodes int) string {
	return fmt.Sprintf("v1 nodes=%d maxttl=%dms drift=%s", nodes, cc.MaxTTL.Milliseconds(),
		strconv.FormatFloat(cc.Factor, 'g', -1, 64))
}

// check refuses a configuration the model cannot run faithfully.
func (cfg *Config) check() error {
	if cfg.Nodes < 1 || cfg.Nodes > maxNodes {
		return fmt.Errorf("model: %d nodes (1 to %d)", cfg.Nodes, maxNodes)
	}
	if len(cfg.Clients) == 0 {
		return fmt.Errorf("model: no clients")
	}
	for i, cc := range cfg.Clients {
		if cc.Extends < 0 || cc.Attempts < 0 {
			return fmt.Errorf("model: client %d: negative attempts or extends", i)
		}
		if err := cc.checkKeys(cfg); err != nil {
			return fmt.Errorf("model: client %d: %w", i, err)
		}
	}
	if cfg.Depth <= 0 || cfg.MaxTime < 0 || cfg.Skew < 0 || cfg.ClientSkew < 0 || cfg.Wipes < 0 || cfg.Pendings < 0 {
		return fmt.Errorf("model: bounds must not be negative, and the depth positive")
	}
	for i, cc := range cfg.Clients {
		if cc.TTL <= 0 || cc.TTL > cc.MaxTTL || cc.TTL%Unit != 0 || cc.MaxTTL%Unit != 0 {
			return fmt.Errorf("model: client %d: ttl %v and max ttl %v must be whole ticks, 0 < ttl <= max ttl", i, cc.TTL, cc.MaxTTL)
		}
		if _, err := script.CheckedQuarantine(cc.MaxTTL, cc.Factor); err != nil {
			return fmt.Errorf("model: client %d: %w", i, err)
		}
		// Clients with the deployment's settings must meet assumption 1;
		// one with other settings is what the nodes must refuse.
		if cfg.ClockJumps || cc.settings(cc.entries(cfg.Nodes)) != cfg.Clients[0].settings(cfg.Clients[0].entries(cfg.Nodes)) {
			continue
		}
		if d := drift.Drift(cc.TTL, cc.Factor); d < time.Duration(max(cfg.Skew, cfg.ClientSkew))*Unit {
			return fmt.Errorf("model: client %d: drift %v of ttl %v is below the skew of %d ticks: assumption 1 would not hold", i, d, cc.TTL, max(cfg.Skew, cfg.ClientSkew))
		}
	}
	return cfg.checkActors()
}

func (cfg *Config) quorum() int { return quorum.Majority(cfg.Nodes) }
