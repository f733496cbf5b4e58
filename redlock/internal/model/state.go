package model

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// phase is where a client is in its TryLock.
type phase byte

const (
	idle       phase = iota // between calls (or before the first)
	acquiring               // the acquire round is out
	committing              // the fence commit round is out
	holding                 // it holds a lease (trusted until its deadline)
	done                    // no attempts left
)

func (p phase) String() string {
	return [...]string{"idle", "acquiring", "committing", "holding", "done"}[p]
}

// client is one client's state. Node sets are bit masks.
type client struct {
	phase    phase
	attempt  int // the current (or last) attempt, from 1
	t0       int // its clock when the attempt's round began, in ticks
	answered uint8
	granted  uint8
	refused  uint8
	replies  [maxNodes]script.AcquireReply
	token    uint64
	commits  uint8
	cfails   uint8
	deadline time.Duration // holding: trusted while its clock is before this
	// An extend round in progress (extending), the number of the round
	// (extends: how many this lease has sent), its start on the client's
	// clock, and the nodes that renewed the key or found it gone.
	extending bool
	extends   int
	e0        int
	eyes      uint8
	egone     uint8
	// missed: the entries that did not renew the lease in its last
	// extend round, which its next round names for re-creation
	// (extendCalls). The model counts as missed every entry not counted
	// when the round was decided, as if no reply came after: the client
	// names no more than these.
	missed uint8
	// overtaken: another lease was trusted at a moment when this one had
	// lapsed (the holder's clock past its deadline); trusting this one
	// again would be a double grant its holder cannot see.
	overtaken bool
	// over: the LockAll this client is a part of has ended (it gave up,
	// or released its set): the part takes no step again.
	over bool
	// The ids the client's entries were verified with as the current
	// round (acquire, commit or extend) read them when it began, and the
	// entries whose reply in it came from that server (identity.go).
	proven [maxNodes]string
	same   uint8
	// wiped: the nodes that lost their data since this attempt began
	// (what the invariant "a lease never outlives its keys" excuses).
	wiped uint8
	// since is the largest token committed, by anyone, before this
	// attempt's round began: Theorem 1 says this attempt's token must be
	// larger.
	since uint64

	// Admission: nodes that answered "not admitted" and are not admitted
	// yet as far as the client knows, the pending mark read on each, and
	// the nodes with an admission call on the wire.
	unadmitted uint8
	mark       [maxNodes]string
	admitting  uint8
	pendings   int
	adm        adm // with Config.Confirm (confirm.go)
}

// msg is a script call on the wire (to a node) or its reply (to the
// client). The key is its canonical encoding.
type msg struct {
	reply   bool
	client  int
	node    int
	attempt int
	round   int // an extend's round (0 for every other call)
	req     script.Request
	res     any
	key     string
}

func newMsg(m msg) msg {
	if m.reply {
		m.key = fmt.Sprintf("R>%d#%d.%d:%s=%v", m.client, m.attempt, m.round, m.req.Script, canonReply(m.node, m.res))
	} else {
		m.key = fmt.Sprintf("Q%d#%d.%d:%s%v%v", m.client, m.attempt, m.round, m.req.Script, m.req.Keys, m.req.Args)
	}
	return m
}

// canonReply is a reply through entry e for a state's identity: the id of
// node e in it written as canonID does.
func canonReply(e int, res any) any {
	switch v := res.(type) {
	case string:
		return canonID(e, v)
	case []any:
		out := make([]any, len(v))
		for k, x := range v {
			out[k] = canonReply(e, x)
		}
		return out
	}
	return res
}

// state is one global state: real time, each clock's lead over it, the
// nodes' data, the clients, the messages on the wire, the faults used,
// and the fencing tokens committed so far.
type state struct {
	T       int
	ahead   []int // per node, then per client: ticks ahead of real time
	nodes   []keyspace
	clients []client
	msgs    []msg
	wipes   int
	tokens  []uint64 // committed, sorted
	maxTok  uint64
	boot    operator     // the operator's Bootstrap runs (bootstrap.go)
	reconf  reconfigurer // the operator's Reconfigure runs (reconfigure.go)
	ident   []prover     // per client: its identity proofs (identity.go)
	// bad is the invariant this state broke, if any.
	bad string
}

func (s *state) clone() *state {
	c := *s
	c.ahead = append([]int(nil), s.ahead...)
	c.nodes = append([]keyspace(nil), s.nodes...)
	c.clients = append([]client(nil), s.clients...)
	c.msgs = append([]msg(nil), s.msgs...)
	c.tokens = append([]uint64(nil), s.tokens...)
	c.ident = append([]prover(nil), s.ident...)
	return &c
}

// nodeNow is node i's clock in ms; clientNow client c's in ticks.
func (s *state) nodeNow(i int) int64    { return int64(s.T+s.ahead[i]) * Unit.Milliseconds() }
func (s *state) clientNow(n, c int) int { return s.T + s.ahead[n+c] }

// encode is the state's identity with node i renamed perm[i] (inv is
// perm's inverse), everything that decides what can happen next, in a
// canonical order; nodeEnc holds each node's key space, encoded once. It
// appends to buf[:0], so that a caller encoding a state under several
// renamings reuses one buffer.
func (s *state) encode(buf []byte, perm, inv []int, nodeEnc [][]byte) []byte {
	b := buf[:0]
	num := func(v int64) { b = strconv.AppendInt(b, v, 10); b = append(b, ',') }
	num(int64(s.T))
	num(int64(s.wipes))
	num(int64(s.maxTok))
	for _, t := range s.tokens {
		num(int64(t))
	}
	b = append(b, '|')
	n := len(perm)
	for j := 0; j < n; j++ {
		num(int64(s.ahead[inv[j]]))
	}
	for _, a := range s.ahead[n:] {
		num(int64(a))
	}
	for j := 0; j < n; j++ {
		b = append(b, nodeEnc[inv[j]]...)
		b = append(b, '|')
	}
	mask := func(m uint8) {
		var out uint8
		for i, p := range perm {
			if m&(1<<i) != 0 {
				out |= 1 << p
			}
		}
		b = append(b, out, ',')
	}
	for _, c := range s.clients {
		b = append(b, byte(c.phase))
		num(int64(c.attempt))
		num(int64(c.t0))
		mask(c.answered)
		mask(c.granted)
		mask(c.refused)
		mask(c.commits)
		mask(c.cfails)
		mask(c.unadmitted)
		mask(c.admitting)
		mask(c.wiped)
		mask(c.same)
		for j := 0; j < n; j++ {
			b = append(b, canonID(inv[j], c.proven[inv[j]])...)
			b = append(b, ',')
		}
		for e := n; e < maxNodes; e++ { // a list longer than the nodes (no Symmetry)
			b = append(b, c.proven[e]...)
			b = append(b, ',')
		}
		if c.extending {
			b = append(b, 'e')
			num(int64(c.e0))
			mask(c.eyes)
			mask(c.egone)
		}
		num(int64(c.extends))
		mask(c.missed)
		if c.overtaken {
			b = append(b, 'o')
		}
		if c.over {
			b = append(b, 'x')
		}
		if c.phase == acquiring || c.phase == committing {
			for j := 0; j < n; j++ {
				i := inv[j]
				if c.answered&(1<<i) != 0 {
					r := c.replies[i]
					num(int64(r.Status))
					num(int64(r.Fence))
					num(int64(r.TimeUs))
				}
			}
		}
		num(int64(c.token))
		num(int64(c.deadline))
		num(int64(c.since))
		num(int64(c.pendings))
		for j := 0; j < n; j++ {
			b = append(b, c.mark[inv[j]]...)
			b = append(b, ',')
		}
		b = c.adm.encode(b) // Confirm runs without Symmetry: no renaming
		b = append(b, '|')
	}
	b = s.encodeActors(b, perm, inv)
	order := make([]int, len(s.msgs))
	for k := range order {
		order[k] = k
	}
	sort.Slice(order, func(x, y int) bool {
		a, c := &s.msgs[order[x]], &s.msgs[order[y]]
		if pa, pc := perm[a.node], perm[c.node]; pa != pc {
			return pa < pc
		}
		return a.key < c.key
	})
	for _, k := range order {
		b = append(b, byte('0'+perm[s.msgs[k].node]))
		b = append(b, s.msgs[k].key...)
		b = append(b, '|')
	}
	return b
}

// nodeEncodings encodes each node's key space at its clock, the id it
// started with as canonID writes it.
func (s *state) nodeEncodings() [][]byte {
	out := make([][]byte, len(s.nodes))
	for i, ks := range s.nodes {
		var sb strings.Builder
		skip := ""
		if e := ks[script.IdentKey]; e != nil && e.exp == 0 && e.str == nodeID(i) {
			skip = script.IdentKey
			sb.WriteString("=;")
		}
		ks.encode(&sb, s.nodeNow(i), skip)
		out[i] = []byte(sb.String())
	}
	return out
}

func count(set uint8) int { return bits.OnesCount8(set) }

// perms lists the permutations of 0..n-1.
func perms(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range perms(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}
