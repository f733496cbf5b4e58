package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/quorum"
	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("status", subcommand{
		summary: "show what every node knows about a lock, and whether it is held",
		run:     statusMain,
	})
}

const defaultStatusTimeout = 2 * time.Second

// Verdicts of status.
const (
	verdictHeld    = "held"
	verdictFree    = "free"
	verdictUnknown = "unknown"
)

// Admission states of a node (restart quarantine, see package redlock).
const (
	admissionAdmitted    = "admitted"    // may vote
	admissionQuarantined = "quarantined" // lost its state; votes again after one max ttl
	admissionNew         = "new"         // no node has a record of it: admitted on first use
	admissionUnknown     = "unknown"     // it, or too many of its peers, did not answer
)

// nodeStatus is one node's part of the report. Field names are the JSON
// interface of "status --json": add, do not rename.
type nodeStatus struct {
	Node      int     `json:"node"`
	Addr      string  `json:"addr"`
	Reachable bool    `json:"reachable"` // answered whether it holds the key
	Answered  bool    `json:"answered"`  // replied at all, perhaps with an error (auth, ACL)
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
	Role      string  `json:"role,omitempty"`
	UptimeS   int64   `json:"uptime_s"`
	RunID     string  `json:"run_id,omitempty"`
	Version   string  `json:"redis_version,omitempty"`
	HoldsKey  bool    `json:"holds_key"`
	Value     string  `json:"value,omitempty"`
	TTLMS     int64   `json:"ttl_ms"` // remaining ms; -1: no expiry; 0 without the key
	Fence     uint64  `json:"fence"`  // the key's fence value on this node (0: none)
	Admission string  `json:"admission"`
	Pending   bool    `json:"quarantine_pending"` // a client has started timing its quarantine

	name    string          // membership name, as redlock records it
	members map[string]bool // names this node has a record of
}

type statusReport struct {
	Key       string       `json:"key"`
	Nodes     []nodeStatus `json:"nodes"`
	Quorum    int          `json:"quorum"`
	Reachable int          `json:"reachable"`
	Voting    int          `json:"voting"` // reachable and admitted (or new)
	Verdict   string       `json:"verdict"`
	Holder    string       `json:"holder,omitempty"` // the value a majority holds
	Holders   int          `json:"holders"`          // nodes holding Holder (or, when free/unknown, the most common value)
	ExpiresMS int64        `json:"expires_in_ms"`    // held: when fewer than a quorum will hold it, unless renewed
	MaxFence  uint64       `json:"max_fence"`        // highest fence value seen
	Summary   string       `json:"summary"`
	Warnings  []string     `json:"warnings,omitempty"`
}

type statusConfig struct {
	nodes   nodeConfig
	key     string
	json    bool
	timeout durationFlag
}

func statusUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock status --nodes ADDR,... --key K [--json] [--timeout D]

Asks every node, in parallel and read-only, whether it answers, its role and
uptime, whether it holds K (value, remaining ttl), K's fence value, and
whether it may vote (restart quarantine: a node that lost its data and that
its peers remember waits one max ttl before it votes again). Then it says
whether the lock is held by a majority, free, or unknown (too few nodes
answered to tell). An unreachable node is reported, not an error.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD, and the variables in [brackets] above.

Exit codes:
  0  the report was printed, whatever the verdict (see "verdict" with --json)
  1  the report could not be written
  2  usage error: bad flags or arguments (no node was contacted)
`)
}

func statusMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sc := &statusConfig{timeout: durationFlag{d: defaultStatusTimeout, set: true}}
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sc.nodes.register(fs, env)
	fs.StringVar(&sc.key, "key", "", "the lock's `key` (required)")
	fs.BoolVar(&sc.json, "json", false, "print the report as JSON")
	fs.Var(&sc.timeout, "timeout", "`duration` bound on the whole check; nodes that have not answered by then are reported unreachable")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			statusUsage(stdout, fs, env)
			return exitOK
		}
		return usageError(stderr, "status", err)
	}
	if err := applyEnv(fs, env); err != nil {
		return usageError(stderr, "status", err)
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "status", fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	if sc.key == "" {
		return usageError(stderr, "status", errors.New("--key is required and must not be empty"))
	}
	if sc.timeout.d <= 0 {
		return usageError(stderr, "status", errors.New("--timeout must be positive"))
	}
	opts, err := sc.nodes.nodeOptions()
	if err != nil {
		return usageError(stderr, "status", err)
	}
	redis.SetLogger(redisLogger{l: newLogger(stderr, false), cfg: &sc.nodes})

	rep := collectStatus(ctx, sc, opts)
	if sc.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			fmt.Fprintf(stderr, "quorumlock status: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	if err := printStatus(stdout, rep); err != nil {
		fmt.Fprintf(stderr, "quorumlock status: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// collectStatus queries every node once, in parallel, within the timeout.
func collectStatus(ctx context.Context, sc *statusConfig, opts []*redis.Options) *statusReport {
	ctx, cancel := context.WithTimeout(ctx, sc.timeout.d)
	defer cancel()
	cs := clients(opts, func(o *redis.Options) {
		// One try per node, bounded by the whole check's timeout: status
		// reports what it sees now, it does not wait for a node.
		o.MaxRetries = -1
		o.DialerRetries = 1
		o.DialTimeout = sc.timeout.d
		o.ReadTimeout = sc.timeout.d
		o.WriteTimeout = sc.timeout.d
		o.PoolSize = 1
	})
	defer closeAll(cs)

	rep := &statusReport{Key: sc.key, Nodes: make([]nodeStatus, len(cs)), Quorum: quorum.Majority(len(cs))}
	var wg sync.WaitGroup
	for i, c := range cs {
		rep.Nodes[i] = nodeStatus{Node: i, Addr: opts[i].Addr, name: memberName(opts[i])}
		wg.Go(func() { probeNode(ctx, c, sc.key, &rep.Nodes[i], &sc.nodes) })
	}
	wg.Wait()
	judge(rep)
	return rep
}

// probeNode reads everything status shows from one node in one pipeline.
// It only reads: status never changes a node.
func probeNode(ctx context.Context, c *redis.Client, key string, ns *nodeStatus, cfg *nodeConfig) {
	start := time.Now()
	pipe := c.Pipeline()
	info := pipe.Info(ctx)
	val := pipe.Get(ctx, key)
	pttl := pipe.PTTL(ctx, key)
	fence := pipe.Get(ctx, redlock.FenceKey(key))
	admitted := pipe.Exists(ctx, redlock.AdmittedKey)
	pending := pipe.Exists(ctx, redlock.PendingKey)
	members := pipe.HKeys(ctx, redlock.MembersKey)
	_, execErr := pipe.Exec(ctx)
	ns.LatencyMS = float64(time.Since(start).Microseconds()) / 1000

	var errs []string
	note := func(what string, err error) {
		errs = append(errs, what+": "+cfg.scrub(err.Error()))
	}
	if execErr != nil && info.Err() == nil && info.Val() == "" {
		// The pipeline failed as a whole (for example a wrong password
		// while connecting) and go-redis set no per-command error.
		ns.Answered = isReply(execErr)
		ns.Error = cfg.scrub(execErr.Error())
		ns.Admission = admissionUnknown
		return
	}
	// A node counts as reachable when it answered the question that
	// matters, whether it holds the key. A transport error fails every
	// command alike; a Redis error reply (auth, ACL, WRONGTYPE) only its own.
	if _, err := val.Result(); err != nil && !errors.Is(err, redis.Nil) {
		ns.Answered = isReply(err)
		ns.Error = cfg.scrub(err.Error())
		ns.Admission = admissionUnknown
		return
	}
	ns.Answered = true
	ns.Reachable = true
	if err := info.Err(); err != nil {
		note("INFO", err)
	} else {
		s := info.Val()
		ns.Role = infoField(s, "role")
		ns.UptimeS, _ = strconv.ParseInt(infoField(s, "uptime_in_seconds"), 10, 64)
		ns.RunID = infoField(s, "run_id")
		ns.Version = infoField(s, "redis_version")
	}
	switch v, err := val.Result(); {
	case err == nil:
		ns.HoldsKey, ns.Value = true, v
		// go-redis passes PTTL's -1 (no expiry) and -2 (no key) through
		// as these durations, unscaled.
		switch d, err := pttl.Result(); {
		case err != nil:
			note("PTTL", err)
		case d == -1:
			ns.TTLMS = -1
		case d == -2: // expired between the GET and the PTTL
			ns.HoldsKey, ns.Value = false, ""
		default:
			ns.TTLMS = d.Milliseconds()
		}
	}
	switch v, err := fence.Result(); {
	case err == nil:
		f, perr := strconv.ParseUint(v, 10, 64)
		if perr != nil {
			note("fence", fmt.Errorf("not a number: %q", v))
		}
		ns.Fence = f
	case !errors.Is(err, redis.Nil):
		note("GET fence", err)
	}
	if n, err := admitted.Result(); err == nil {
		if n == 1 {
			ns.Admission = admissionAdmitted
		}
	} else {
		note("admission marker", err)
		ns.Admission = admissionUnknown
	}
	if n, err := pending.Result(); err == nil {
		ns.Pending = n == 1
	} else {
		note("pending mark", err)
	}
	if names, err := members.Result(); err == nil {
		ns.members = map[string]bool{}
		for _, n := range names {
			ns.members[n] = true
		}
	} else {
		note("membership records", err)
	}
	ns.Error = strings.Join(errs, "; ")
}

// isReply reports whether err is an error reply from Redis (or a nil
// reply), which proves the node answered.
func isReply(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || (errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded))
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// judge fills in admission states and the verdict.
//
// held: one value is on a majority of the nodes. free: no value can be on
// a majority, even counting every unreachable node as holding it. unknown:
// anything else. Keys expire on their own, so "held" is a snapshot: the
// report says for how much longer, unless the holder renews.
func judge(r *statusReport) {
	n := len(r.Nodes)
	unreachable := 0
	for i := range r.Nodes {
		ns := &r.Nodes[i]
		if !ns.Reachable {
			unreachable++
			continue
		}
		r.Reachable++
		r.MaxFence = max(r.MaxFence, ns.Fence)
		if ns.Admission == "" {
			ns.Admission = admissionFor(r.Nodes, i, r.Quorum)
		}
		if ns.Admission == admissionAdmitted || ns.Admission == admissionNew {
			r.Voting++
		}
	}

	counts := map[string]int{}
	for _, ns := range r.Nodes {
		if ns.HoldsKey {
			counts[ns.Value]++
		}
	}
	best, bestN := "", 0
	for v, c := range counts {
		if c > bestN || (c == bestN && v < best) {
			best, bestN = v, c
		}
	}
	r.Holders = bestN
	switch {
	case bestN >= r.Quorum:
		r.Verdict, r.Holder = verdictHeld, best
		var ttls []int64
		for _, ns := range r.Nodes {
			if ns.HoldsKey && ns.Value == best {
				ttls = append(ttls, ns.TTLMS)
			}
		}
		// It stops being held when the q-th longest of its ttls runs out.
		slices.SortFunc(ttls, func(a, b int64) int {
			return cmpTTL(b, a)
		})
		r.ExpiresMS = ttls[r.Quorum-1]
		until := "until it is released"
		if r.ExpiresMS >= 0 {
			until = fmt.Sprintf("for about %v more unless its holder renews it", (time.Duration(r.ExpiresMS) * time.Millisecond).Round(time.Millisecond))
		}
		r.Summary = fmt.Sprintf("HELD: %d of %d nodes hold the same value (%d needed), %s.", bestN, n, r.Quorum, until)
	case bestN+unreachable < r.Quorum:
		r.Verdict = verdictFree
		r.Summary = fmt.Sprintf("FREE: no value is on a majority (%d of %d nodes)", r.Quorum, n)
		if unreachable > 0 {
			r.Summary += fmt.Sprintf(", and the %d node(s) that did not answer could not make one", unreachable)
		}
		r.Summary += "."
		if bestN > 0 {
			r.Summary += fmt.Sprintf(" %d node(s) still carry a leftover that expires on its own.", len(nonEmpty(r.Nodes)))
		}
	default:
		r.Verdict = verdictUnknown
		r.Summary = fmt.Sprintf("UNKNOWN: %d of %d nodes answered; with %d unreachable, a majority of %d may or may not hold the key.", r.Reachable, n, unreachable, r.Quorum)
	}
	if r.Voting < r.Quorum {
		r.Warnings = append(r.Warnings, fmt.Sprintf("only %d node(s) can vote now (reachable and not in quarantine); a lock needs %d, so none can be taken", r.Voting, r.Quorum))
	}
	if n%2 == 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d nodes: an even count tolerates no more failed nodes than %d nodes would", n, n-1))
	}
	for _, ns := range r.Nodes {
		if ns.Reachable && ns.Role != "" && ns.Role != "master" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %d (%s) is a %s, not a primary: Redlock needs independent primaries", ns.Node, ns.Addr, ns.Role))
		}
	}
}

// cmpTTL orders remaining ttls with "no expiry" (-1) as the longest.
func cmpTTL(a, b int64) int {
	if a == b {
		return 0
	}
	if a == -1 {
		return 1
	}
	if b == -1 {
		return -1
	}
	if a < b {
		return -1
	}
	return 1
}

func nonEmpty(nodes []nodeStatus) []nodeStatus {
	var out []nodeStatus
	for _, ns := range nodes {
		if ns.HoldsKey {
			out = append(out, ns)
		}
	}
	return out
}

// admissionFor decides the state of node i, which answered and has no
// admission marker, the way redlock's admission does: restarted if any
// peer has a record of it, new if enough peers (n-q+1) answered without one.
func admissionFor(nodes []nodeStatus, i, q int) string {
	name := nodes[i].name
	rec, norec := 0, 0
	for j, ns := range nodes {
		if j == i || !ns.Reachable || ns.members == nil {
			continue
		}
		if ns.members[name] {
			rec++
		} else {
			norec++
		}
	}
	switch {
	case rec > 0:
		return admissionQuarantined
	case norec >= len(nodes)-q+1:
		return admissionNew
	}
	return admissionUnknown
}

func printStatus(w io.Writer, r *statusReport) error {
	fmt.Fprintf(w, "key %q on %d nodes (quorum %d)\n\n", r.Key, len(r.Nodes), r.Quorum)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tSTATE\tROLE\tUPTIME\tKEY\tTTL\tFENCE\tVOTING")
	for _, ns := range r.Nodes {
		if !ns.Reachable {
			state := "down"
			if ns.Answered {
				state = "refused"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t-\t-\t%s\n", ns.Node, ns.Addr, state, ns.Admission)
			continue
		}
		key, ttl := "-", "-"
		if ns.HoldsKey {
			key = ns.Value
			switch {
			case ns.TTLMS == -1:
				ttl = "none"
			default:
				ttl = (time.Duration(ns.TTLMS) * time.Millisecond).String()
			}
		}
		fence := "-"
		if ns.Fence > 0 {
			fence = strconv.FormatUint(ns.Fence, 10)
		}
		voting := ns.Admission
		if ns.Pending && ns.Admission != admissionAdmitted {
			voting += " (timer running)"
		}
		fmt.Fprintf(tw, "%d\t%s\tup %.1fms\t%s\t%s\t%s\t%s\t%s\t%s\n", ns.Node, ns.Addr, ns.LatencyMS,
			orDash(ns.Role), time.Duration(ns.UptimeS)*time.Second, key, ttl, fence, voting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, ns := range r.Nodes {
		if ns.Error != "" {
			fmt.Fprintf(w, "node %d (%s): %s\n", ns.Node, ns.Addr, ns.Error)
		}
	}
	for _, ns := range r.Nodes {
		if ns.Admission == admissionQuarantined {
			fmt.Fprintf(w, "node %d (%s) lost its data (restart without persistence, failover or flush) and does not vote until one max ttl has passed since a client noticed\n", ns.Node, ns.Addr)
		}
	}
	if r.Holder != "" {
		fmt.Fprintf(w, "holder value: %s\n", r.Holder)
	}
	if r.MaxFence > 0 {
		fmt.Fprintf(w, "highest fence seen: %d\n", r.MaxFence)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", r.Summary)
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
