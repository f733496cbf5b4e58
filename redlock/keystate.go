package redlock

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"
)

// What Inspect reports: a key's state on every node, and its verdict.

// Verdict is Inspect's reading of a key across the nodes.
type Verdict string

const (
	VerdictHeld    Verdict = "held"    // one value is on a majority of the nodes
	VerdictFree    Verdict = "free"    // no value can be on a majority, even counting every silent node
	VerdictUnknown Verdict = "unknown" // too few nodes answered to tell
)

// Admission is whether a node may vote, as Inspect sees it.
type Admission string

const (
	AdmissionAdmitted    Admission = "admitted"    // votes for clients with this client's settings
	AdmissionQuarantined Admission = "quarantined" // serving a quarantine (see NodeState.QuarantineLeft)
	AdmissionUnadmitted  Admission = "unadmitted"  // no marker and no quarantine yet: new, or lost its data; a client's next attempt starts the quarantine
	AdmissionMismatch    Admission = "mismatch"    // admitted or quarantined under other settings, or being reconfigured to them or retired (NodeState.Settings holds its marker)
	// AdmissionReconfiguring: a reconfiguration to this client's settings
	// holds the node off (Client.Reconfigure); it admits itself when the
	// hold-off ends (NodeState.QuarantineLeft).
	AdmissionReconfiguring Admission = "reconfiguring"
	AdmissionUnknown       Admission = "unknown" // did not answer
)

// ServerInfo is what a node's INFO says about the server.
type ServerInfo struct {
	Version string
	Role    string
	RunID   string
	Uptime  time.Duration
}

// NodeState is one node's part of a KeyState.
type NodeState struct {
	Node      int
	Addr      string
	Err       error // why the node did not answer; nil when it did
	Latency   time.Duration
	Server    ServerInfo // zero when the client cannot ask (no INFO)
	Admission Admission
	Settings  string // the settings of its marker or of its quarantine, "" when it has neither
	// ReconfiguringTo is, for a node a reconfiguration marked, the new
	// settings it moves the node to ("" for none): with
	// AdmissionReconfiguring they are this client's; with
	// AdmissionMismatch the node refuses this client because of the change.
	// Retired: the change took the node out of the deployment, and it
	// refuses every client.
	ReconfiguringTo string
	Retired         bool
	// QuarantineLeft is, for a quarantined node, how much of its
	// quarantine is left on its own clock; 0 or less means it is over and
	// the next attempt of any client admits it. For a reconfiguring node,
	// it is the hold-off left (0: over), and -1 when none is stamped yet
	// (the reconfiguration has not reached its second step: if it
	// stopped, it must be run again).
	QuarantineLeft time.Duration
	Value          string        // the key's value, "" when the node does not hold it
	TTL            time.Duration // the key's remaining life; -1 without expiry
	Fence          uint64        // the key's fence value (0: none)
	Metadata       string        // the metadata stored with Value (WithMetadata), "" for none
}

// KeyState is an advisory snapshot of one key on every node, from
// Client.Inspect. It is a snapshot: keys expire and holders renew between
// the moment it was read and the moment it is looked at, so it must never
// be used to decide who may act as the holder (that is what a lease and
// its fencing token are for).
type KeyState struct {
	Key      string
	Settings string // the settings of the client that inspected
	Quorum   int
	Nodes    []NodeState
	Answered int // nodes that answered
	Voting   int // nodes that answered and are admitted with Settings
	Verdict  Verdict
	Holder   string // with VerdictHeld: the value a majority holds
	Holders  int    // nodes holding Holder (otherwise: the most common value)
	// ExpiresIn is, with VerdictHeld, how long until fewer than a majority
	// hold the value unless its holder renews it; -1 when it has no expiry.
	ExpiresIn time.Duration
	MaxFence  uint64 // the highest fence value seen
	Summary   string // one sentence for people
	// Metadata is, with VerdictHeld, what the holder stored with the key
	// (WithMetadata) on the nodes holding Holder; "" for none.
	Metadata string
}

// judge fills in the verdict. held: one value is on a majority of the
// nodes. free: no value can be on a majority, even counting every silent
// node as holding it. unknown: anything else.
func (ks *KeyState) judge() {
	n := len(ks.Nodes)
	counts := map[string]int{}
	for _, ns := range ks.Nodes {
		if ns.Admission == AdmissionUnknown {
			continue
		}
		ks.Answered++
		ks.MaxFence = max(ks.MaxFence, ns.Fence)
		if ns.Admission == AdmissionAdmitted {
			ks.Voting++
		}
		if ns.Value != "" {
			counts[ns.Value]++
		}
	}
	for v, k := range counts {
		if k > ks.Holders || (k == ks.Holders && v < ks.Holder) {
			ks.Holder, ks.Holders = v, k
		}
	}
	silent := n - ks.Answered
	unread := "did not answer"
	for _, ns := range ks.Nodes {
		if errors.Is(ns.Err, ErrNodeRefused) {
			unread = "did not answer or refused this client"
			break
		}
	}
	switch {
	case ks.Holders >= ks.Quorum:
		ks.Verdict = VerdictHeld
		var ttls []time.Duration
		for _, ns := range ks.Nodes {
			if ns.Value == ks.Holder {
				ttls = append(ttls, ns.TTL)
			}
		}
		// It stops being held when the q-th longest of its ttls runs out;
		// -1 (no expiry) is the longest.
		slices.SortFunc(ttls, func(a, b time.Duration) int {
			if a == -1 || b == -1 {
				return cmpBool(b == -1, a == -1)
			}
			return cmp.Compare(b, a)
		})
		ks.ExpiresIn = ttls[ks.Quorum-1]
		// The holder writes the same metadata on every node it holds;
		// one that has none (its write was late, or lost) shows none.
		for _, ns := range ks.Nodes {
			if ns.Value == ks.Holder && ns.Metadata != "" {
				ks.Metadata = ns.Metadata
				break
			}
		}
		until := "until it is released"
		if ks.ExpiresIn >= 0 {
			until = fmt.Sprintf("for about %v more unless its holder renews it", ks.ExpiresIn.Round(time.Millisecond))
		}
		ks.Summary = fmt.Sprintf("HELD: %d of %d nodes hold the same value (%d needed), %s.", ks.Holders, n, ks.Quorum, until)
	case ks.Holders+silent < ks.Quorum:
		ks.Verdict, ks.Holder = VerdictFree, ""
		ks.Summary = fmt.Sprintf("FREE: no value is on a majority (%d of %d nodes)", ks.Quorum, n)
		if silent > 0 {
			ks.Summary += fmt.Sprintf(", and the %d node(s) that %s could not make one", silent, unread)
		}
		ks.Summary += "."
	default:
		ks.Verdict, ks.Holder = VerdictUnknown, ""
		ks.Summary = fmt.Sprintf("UNKNOWN: %d of %d nodes answered; with %d that %s, a majority of %d may or may not hold the key.", ks.Answered, n, silent, unread, ks.Quorum)
	}
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
