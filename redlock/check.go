package redlock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/nodesettings"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// What Client.Check (inspect.go) reports of a deployment, how it judges
// each node, and the ACL checks it asks the nodes to run.

// CheckVerdict is Client.Check's judgement of a deployment.
type CheckVerdict string

const (
	// CheckOK: every node answers, votes for this client, and has the
	// settings mutual exclusion depends on.
	CheckOK CheckVerdict = "ok"
	// CheckDegraded: a majority can vote and no node has an unsafe setting,
	// but some nodes cannot vote for this client (down, refusing it, in
	// quarantine, other settings) or miss an ACL permission the library
	// needs: fewer failures are tolerated than the deployment was built for.
	CheckDegraded CheckVerdict = "degraded"
	// CheckUnavailable: fewer than a majority can vote: no lock can be
	// taken now.
	CheckUnavailable CheckVerdict = "unavailable"
	// CheckUnsafe: some node has a setting under which a granted lock can
	// be forgotten (eviction, RDB snapshots, an AOF not synced on every
	// write, replicas, a replica in the list): mutual exclusion is not
	// assured, whatever the other nodes say.
	CheckUnsafe CheckVerdict = "unsafe"
)

// Severity says how much a Problem matters.
type Severity string

const (
	SeverityUnsafe   Severity = "unsafe"   // can break mutual exclusion
	SeverityDegraded Severity = "degraded" // the node cannot serve this client fully
	SeverityNote     Severity = "note"     // not checked, or worth knowing
)

// Problem is one finding of Check on one node.
type Problem struct {
	Severity Severity
	What     string // what was found
	Fix      string // what to do
}

// ClockOffsetBound is the clock difference between a node and the client
// above which Check reports the node's clock. Redlock relies on clocks
// that run at the same rate, not on clocks that agree; but two clocks
// this far apart are not synchronized at all, and an unsynchronized clock
// is the one that jumps when someone fixes it.
const ClockOffsetBound = 250 * time.Millisecond

// NodeCheck is one node's part of a CheckReport.
type NodeCheck struct {
	Node int
	Addr string
	Err  error // why the node could not be read; nil when it answered
	// RTT is the round trip of the TIME command that measured ClockOffset.
	RTT    time.Duration
	Server ServerInfo
	// Replicas is INFO's connected_slaves.
	Replicas int
	// Eviction is maxmemory-policy ("" when unknown).
	Eviction string
	// ConfigRead says whether CONFIG GET answered (ACL users and some
	// managed services refuse it); Save and AppendFsync are valid only
	// then. AppendOnly comes from INFO and is known whenever it answered.
	ConfigRead  bool
	Save        string // RDB save points, "" for none
	AppendOnly  bool
	AppendFsync string
	// ClockOffset is the node's TIME minus the client's clock halfway
	// through the round trip; off by at most RTT/2.
	ClockOffset time.Duration
	ClockRead   bool
	// Admission, Settings, ReconfiguringTo and QuarantineLeft are as in
	// Inspect's NodeState.
	Admission       Admission
	Settings        string
	ReconfiguringTo string
	QuarantineLeft  time.Duration
	// ACLChecked says whether the node could tell which commands this
	// client's user may run (Redis 7 or later); Denied lists those it may
	// not, as "COMMAND key-or-channel".
	ACLChecked bool
	Denied     []string
	// Identity is the server identity (quorumlock:node) this client
	// proved the entry reaches, "" while it is not verified: the entry's
	// votes count only once it is (docs/protocol.md, "One server, one
	// vote").
	Identity string
	Problems []Problem

	aclErr error      // why the ACL check could not run
	denied []aclCheck // what Denied names, with whether each is optional
}

// Fit reports whether the node can vote for this client and has no
// problem worse than a note.
func (n *NodeCheck) Fit() bool {
	if n.Err != nil || n.Admission != AdmissionAdmitted {
		return false
	}
	for _, p := range n.Problems {
		if p.Severity != SeverityNote {
			return false
		}
	}
	return true
}

// CheckReport is Client.Check's account of a deployment.
type CheckReport struct {
	Settings string // this client's settings, as the nodes record them
	Quorum   int
	Nodes    []NodeCheck
	Fit      int // nodes for which NodeCheck.Fit holds
	Unsafe   int // nodes with a problem of SeverityUnsafe
	Verdict  CheckVerdict
	Summary  string // one sentence for people
}

// checkProbeKey is the key Check reads the nodes' admission through: in
// the library's own namespace, so it never meets a caller's key.
const checkProbeKey = script.Prefix + "check"

func (n *NodeCheck) deny(a aclCheck) {
	n.denied = append(n.denied, a)
	n.Denied = append(n.Denied, a.name())
}

// aclCheck is one command, with sample arguments, that the library's
// scripts or its client run.
type aclCheck struct {
	args     []string
	optional bool // the library works without it, with less (see docs/operations.md)
}

func (a aclCheck) name() string {
	if len(a.args) > 1 {
		return a.args[0] + " " + a.args[1]
	}
	return a.args[0]
}

// aclChecks lists, in the order aclScript answers them, the commands of
// docs/operations.md's least-privilege ACL user: on the library's own keys
// and channels, and the ones that touch a caller's key on each of keys.
func aclChecks(keys []string) []aclCheck {
	own := checkProbeKey
	ch := script.Prefix + "released:check"
	out := []aclCheck{
		{args: []string{"EVALSHA", "0000000000000000000000000000000000000000", "0"}},
		{args: []string{"EVAL", "return 1", "0"}},
		{args: []string{"TIME"}},
		{args: []string{"GET", own}},
		{args: []string{"SET", own, "v", "PX", "1000"}},
		{args: []string{"DEL", own}},
		{args: []string{"MGET", own}},
		{args: []string{"HMGET", own, "f"}},
		{args: []string{"HSET", own, "f", "v"}},
		{args: []string{"PEXPIRE", own, "1000"}},
		{args: []string{"PTTL", own}},
		{args: []string{"ZADD", own, "1", "m"}},
		{args: []string{"ZRANGE", own, "0", "-1"}},
		{args: []string{"ZRANGEBYSCORE", own, "-inf", "+inf"}},
		{args: []string{"ZREM", own, "m"}},
		{args: []string{"ZREMRANGEBYSCORE", own, "-inf", "1"}},
		{args: []string{"ZSCORE", own, "m"}},
		{args: []string{"PUBLISH", ch, "m"}},
		{args: []string{"INFO"}, optional: true},
		{args: []string{"SUBSCRIBE", ch}, optional: true},
		{args: []string{"UNSUBSCRIBE", ch}, optional: true},
	}
	for _, k := range keys {
		out = append(out,
			aclCheck{args: []string{"GET", k}},
			aclCheck{args: []string{"SET", k, "v", "NX", "PX", "1000"}},
			aclCheck{args: []string{"DEL", k}},
			aclCheck{args: []string{"PEXPIRE", k, "1000"}},
			aclCheck{args: []string{"PTTL", k}},
		)
	}
	return out
}

// aclArgs flattens aclChecks(keys) for aclScript: each check is its
// argument count, then its arguments.
func aclArgs(keys []string) []any {
	var out []any
	for _, a := range aclChecks(keys) {
		out = append(out, len(a.args))
		for _, s := range a.args {
			out = append(out, s)
		}
	}
	return out
}

// aclScript asks the node, for each check, whether the user running the
// script may run it (redis.acl_check_cmd, Redis 7 and later): 1 or 0 per
// check. On an older server it answers -1. It runs nothing it checks.
const aclScript = `
if not redis.acl_check_cmd then return -1 end
local r, i = {}, 1
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  if redis.acl_check_cmd(unpack(ARGV, i + 1, i + n)) then r[#r + 1] = 1 else r[#r + 1] = 0 end
  i = i + n + 1
end
return r
`

// judge lists the node's problems.
func (n *NodeCheck) judge(c *Client) {
	add := func(s Severity, what, fix string) { n.Problems = append(n.Problems, Problem{s, what, fix}) }
	if n.Err != nil {
		switch {
		case errors.Is(n.Err, ErrNodeRefused):
			add(SeverityDegraded, "refuses this client: "+n.Err.Error(), "check the credentials, the ACL user and the TLS settings for this node")
		default:
			add(SeverityDegraded, "did not answer: "+n.Err.Error(), "check the address, that the server runs, and the network to it")
		}
		return
	}
	if n.Identity == "" {
		add(SeverityNote, "its identity is not verified yet: its votes count once this client has proven which server the entry reaches",
			"nothing to do: the next call that reaches it proves it (an entry that reaches another entry's server is refused then)")
	}
	if n.Server.Role != "" && n.Server.Role != "master" {
		add(SeverityUnsafe, "is a "+n.Server.Role+", not a primary", "point this entry at an independent primary")
	}
	if n.Replicas > 0 {
		add(SeverityUnsafe, fmt.Sprintf("has %d replica(s): a failover to one forgets the locks it had not received, while the node stays admitted", n.Replicas),
			"give the node no replicas")
	}
	switch n.Eviction {
	case "", "noeviction":
	default:
		add(SeverityUnsafe, "maxmemory-policy is "+n.Eviction+": an evicted key is a forgotten lock", "set maxmemory-policy noeviction")
	}
	if n.ConfigRead {
		for _, r := range nodesettings.Persistence(n.Save, n.AppendOnly, n.AppendFsync) {
			add(SeverityUnsafe, r.What, r.Fix)
		}
	} else {
		add(SeverityNote, "persistence settings not read (CONFIG GET refused)", "check save and appendfsync on the node by hand, or run check as a user that may run CONFIG GET")
	}
	if n.ClockRead {
		if d := n.ClockOffset; d > ClockOffsetBound || d < -ClockOffsetBound {
			add(SeverityDegraded, fmt.Sprintf("its clock is %v off this client's (measured within %v)", d.Round(time.Millisecond), (n.RTT/2).Round(time.Millisecond)),
				"synchronize the clocks (NTP): a clock this far off is one that jumps when it is corrected")
		}
	} else {
		add(SeverityNote, "clock not read (TIME refused)", "allow +time for the ACL user: the scripts need it")
	}
	if n.ACLChecked {
		var need, opt []string
		for _, d := range n.denied {
			if d.optional {
				opt = append(opt, d.name())
			} else {
				need = append(need, d.name())
			}
		}
		if len(need) > 0 {
			add(SeverityDegraded, "the ACL user may not run "+strings.Join(need, ", "), "grant what docs/operations.md's least-privilege ACL user lists")
		}
		if len(opt) > 0 {
			add(SeverityNote, "the ACL user may not run "+strings.Join(opt, ", ")+" (optional)", "without INFO no server details; without SUBSCRIBE a waiting Lock polls")
		}
	} else {
		why := "unknown"
		if n.aclErr != nil {
			why = n.aclErr.Error()
		}
		add(SeverityNote, "ACL permissions not checked: "+why, "check the user against docs/operations.md's least-privilege ACL user by hand")
	}
	switch n.Admission {
	case AdmissionAdmitted:
	case AdmissionUnadmitted:
		add(SeverityDegraded, "not admitted: a new deployment, or the node lost its data", "on a new deployment run quorumlock bootstrap; otherwise the first client's attempt starts its quarantine")
	case AdmissionQuarantined:
		add(SeverityDegraded, fmt.Sprintf("serves its restart quarantine: %v left", max(n.QuarantineLeft, 0).Round(time.Second)), "wait: it admits itself when the quarantine ends")
	case AdmissionReconfiguring:
		if n.QuarantineLeft < 0 {
			add(SeverityDegraded, "a reconfiguration to these settings stopped before its hold-off", "run the reconfigure command again with the same arguments")
		} else {
			add(SeverityDegraded, fmt.Sprintf("reconfiguration hold-off: %v left", n.QuarantineLeft.Round(time.Second)), "wait: it admits itself when the hold-off ends")
		}
	case AdmissionMismatch:
		add(SeverityDegraded, fmt.Sprintf("keeps other settings (%s) than this client (%s)", n.Settings, c.dep.marker),
			"use the deployment's settings, or move the deployment with quorumlock reconfigure")
	}
}

func (r *CheckReport) judge() {
	for i := range r.Nodes {
		nc := &r.Nodes[i]
		if nc.Fit() {
			r.Fit++
		}
		for _, p := range nc.Problems {
			if p.Severity == SeverityUnsafe {
				r.Unsafe++
				break
			}
		}
	}
	n := len(r.Nodes)
	switch {
	case r.Unsafe > 0:
		r.Verdict = CheckUnsafe
		r.Summary = fmt.Sprintf("%d of %d nodes have settings under which a granted lock can be forgotten: mutual exclusion is not assured", r.Unsafe, n)
	case r.Fit < r.Quorum:
		r.Verdict = CheckUnavailable
		r.Summary = fmt.Sprintf("only %d of %d nodes can vote for this client; a lock needs %d, so none can be taken now", r.Fit, n, r.Quorum)
	case r.Fit < n:
		r.Verdict = CheckDegraded
		r.Summary = fmt.Sprintf("%d of %d nodes fit: locks can be taken, and %d more node(s) can fail before they cannot", r.Fit, n, r.Fit-r.Quorum)
	default:
		r.Verdict = CheckOK
		r.Summary = fmt.Sprintf("all %d nodes fit", n)
	}
}
