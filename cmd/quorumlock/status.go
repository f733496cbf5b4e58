package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("status", subcommand{
		summary: "show what every node knows about a lock, and whether it is held",
		run:     statusMain,
	})
}

const defaultStatusTimeout = 2 * time.Second

// Exit statuses of status by verdict, so that a shell script need not
// parse the report. 0 is free ("is it free?" is what a script asks).
const (
	exitHeld    = 3
	exitUnknown = 4
	exitNoVote  = 5 // free, but fewer than a majority of nodes can vote: nobody can take it now
)

// statusExit is the exit status for a report: its verdict, and for a free
// key whether a lock could be taken now.
func statusExit(r *statusReport) int {
	switch r.Verdict {
	case verdictFree:
		if r.Voting < r.Quorum {
			return exitNoVote
		}
		return exitOK
	case verdictHeld:
		return exitHeld
	}
	return exitUnknown
}

// Verdicts of status: redlock.Inspect's.
const (
	verdictHeld    = string(redlock.VerdictHeld)
	verdictFree    = string(redlock.VerdictFree)
	verdictUnknown = string(redlock.VerdictUnknown)
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
	// Metadata is what the holder of Value stored with the key.
	Metadata string `json:"metadata,omitempty"`
	// Admission is redlock.Admission: admitted, quarantined, unadmitted,
	// reconfiguring, mismatch or unknown.
	Admission      string `json:"admission"`
	Pending        bool   `json:"quarantine_pending"`           // a client has started timing its quarantine
	QuarantineLeft int64  `json:"quarantine_left_ms,omitempty"` // with Pending: ms left on the node's clock
	// HoldOffLeft is, for a node that a reconfiguration to these settings
	// holds off (admission "reconfiguring"), the ms of the hold-off left on
	// its clock: 0 once over, -1 when none is stamped yet.
	HoldOffLeft *int64 `json:"hold_off_left_ms,omitempty"`
	// ReconfiguringTo: the settings a reconfiguration marked the node for
	// (redlock.NodeState.ReconfiguringTo); Retired: it took the node out.
	ReconfiguringTo string `json:"reconfiguring_to,omitempty"`
	Retired         bool   `json:"retired,omitempty"`
	Settings        string `json:"settings,omitempty"` // the deployment settings the node keeps
}

type statusReport struct {
	Key       string       `json:"key"`
	Settings  string       `json:"settings"` // the settings status compared the nodes with (--max-ttl)
	Nodes     []nodeStatus `json:"nodes"`
	Quorum    int          `json:"quorum"`
	Reachable int          `json:"reachable"`
	Voting    int          `json:"voting"` // reachable and admitted with Settings
	Verdict   string       `json:"verdict"`
	Holder    string       `json:"holder,omitempty"` // the value a majority holds
	Holders   int          `json:"holders"`          // nodes holding Holder (or, when free/unknown, the most common value)
	ExpiresMS int64        `json:"expires_in_ms"`    // held: when fewer than a quorum will hold it, unless renewed
	MaxFence  uint64       `json:"max_fence"`        // highest fence value seen
	Summary   string       `json:"summary"`
	Warnings  []string     `json:"warnings,omitempty"`
	// HolderMetadata is what the holder stored with the key (for
	// "quorumlock run", who runs what: host=... pid=... cmd="...").
	HolderMetadata string `json:"holder_metadata,omitempty"`
}

type statusConfig struct {
	readFlags
	key string
}

func statusUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock status --nodes ADDR,... --key K [--json] [--timeout D]

Asks every node, in parallel and read-only, whether it answers, its role and
uptime, whether it holds K (value, remaining ttl), K's fence value, and
whether it may vote for clients with these settings (--max-ttl): admitted;
quarantined (it lost its data, or the deployment is new, and waits one max
ttl before it votes; the time left is shown); unadmitted (no client has
touched it since it was emptied); or mismatch (it keeps other settings).
Then it says whether the lock is held by a majority, free, or unknown (too
few nodes answered to tell). An unreachable node is reported, not an error.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD, and the variables in [brackets] above.

Exit codes (the verdict, for scripts: "if quorumlock status ...; then"
means "if K is free"):
  0  free: no value can be on a majority of the nodes, and a majority
     can vote, so a lock can be taken now
  1  the report could not be made or written
  2  usage error: bad flags or arguments (no node was contacted)
  3  held: one value is on a majority of the nodes
  4  unknown: too few nodes answered to tell
  5  free, but fewer than a majority of the nodes can vote (down,
     in quarantine, held off, other settings): nobody can take it now
The report is printed for 0, 3, 4 and 5.
`)
}

func statusMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sc := &statusConfig{}
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock status", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sc.register(fs, env, defaultStatusTimeout, "`duration` bound on the whole check; nodes that have not answered by then are reported unreachable")
	fs.StringVar(&sc.key, "key", "", "the lock's `key` (required)")
	if code, ok := parseFlags(fs, args, env, "status", statusUsage, false, stdout, stderr); !ok {
		return code
	}
	if sc.key == "" {
		return usageError(stderr, "status", errors.New("--key is required and must not be empty"))
	}
	if err := redlock.CheckKey(sc.key); err != nil {
		return usageError(stderr, "status", fmt.Errorf("--key: %w", err))
	}
	opts, code, ok := sc.options("status", stderr)
	if !ok {
		return code
	}
	redis.SetLogger(redisLogger{l: newLogger(stderr, false)})

	rep, err := collectStatus(ctx, sc, opts)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock status: %s\n", redact(err.Error()))
		return exitFailure
	}
	return sc.write("status", rep, func(w io.Writer) error { return printStatus(w, rep) }, statusExit(rep), stdout, stderr)
}

// collectStatus reads every node once, in parallel, within the timeout,
// through redlock.Inspect: status reports what it sees now, it does not
// wait for a node, and it never changes one.
func collectStatus(ctx context.Context, sc *statusConfig, opts []*redis.Options) (*statusReport, error) {
	ctx, cancel := context.WithTimeout(ctx, sc.timeout.d)
	defer cancel()
	// A node that refuses the client (a wrong password) is reported like
	// the others, with its reply, not a reason to report nothing.
	lc, closeLC, err := readOnlyClient(opts, sc.timeout.d, sc.maxTTL.d)
	if err != nil {
		return nil, err
	}
	defer closeLC()
	ks, err := lc.Inspect(ctx, sc.key)
	if err != nil {
		return nil, err
	}
	rep := &statusReport{Key: ks.Key, Settings: ks.Settings, Quorum: ks.Quorum, Reachable: ks.Answered, Voting: ks.Voting,
		Verdict: string(ks.Verdict), Holder: ks.Holder, Holders: ks.Holders, MaxFence: ks.MaxFence, Summary: ks.Summary,
		HolderMetadata: redact(ks.Metadata)}
	if ks.Verdict == redlock.VerdictHeld {
		rep.ExpiresMS = ks.ExpiresIn.Milliseconds()
		if ks.ExpiresIn < 0 {
			rep.ExpiresMS = -1
		}
	}
	for i, n := range ks.Nodes {
		ns := nodeStatus{Node: n.Node, Addr: opts[i].Addr, Reachable: n.Err == nil, Answered: n.Err == nil || isReply(n.Err) || errors.Is(n.Err, redlock.ErrNodeRefused),
			LatencyMS: float64(n.Latency.Microseconds()) / 1000, Role: n.Server.Role, UptimeS: int64(n.Server.Uptime / time.Second),
			RunID: n.Server.RunID, Version: n.Server.Version, HoldsKey: n.Value != "", Value: n.Value, Fence: n.Fence, Metadata: redact(n.Metadata),
			Admission: string(n.Admission), Settings: n.Settings, Pending: n.Admission == redlock.AdmissionQuarantined,
			ReconfiguringTo: n.ReconfiguringTo, Retired: n.Retired}
		if n.Err != nil {
			ns.Error = redact(n.Err.Error())
		}
		if n.Value != "" {
			ns.TTLMS = n.TTL.Milliseconds()
			if n.TTL < 0 {
				ns.TTLMS = -1
			}
		}
		if ns.Pending {
			ns.QuarantineLeft = max(n.QuarantineLeft.Milliseconds(), 0)
		}
		if n.Admission == redlock.AdmissionReconfiguring {
			left := int64(-1)
			if n.QuarantineLeft >= 0 {
				left = n.QuarantineLeft.Milliseconds()
			}
			ns.HoldOffLeft = &left
		}
		rep.Nodes = append(rep.Nodes, ns)
	}
	rep.warn()
	return rep, nil
}

// isReply reports whether err is an error reply from Redis (or a nil
// reply), which proves the node answered.
func isReply(err error) bool {
	var re redis.Error
	return errors.Is(err, redis.Nil) || (errors.As(err, &re) && !errors.Is(err, context.DeadlineExceeded))
}

// warn adds what an operator should know beyond the verdict.
func (r *statusReport) warn() {
	n := len(r.Nodes)
	if r.Voting < r.Quorum {
		r.Warnings = append(r.Warnings, fmt.Sprintf("only %d node(s) can vote now (reachable and admitted with these settings); a lock needs %d, so none can be taken", r.Voting, r.Quorum))
	}
	if n%2 == 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d nodes: an even count tolerates no more failed nodes than %d nodes would", n, n-1))
	}
	for _, ns := range r.Nodes {
		if ns.Reachable && ns.Role != "" && ns.Role != "master" {
			r.Warnings = append(r.Warnings, fmt.Sprintf("node %d (%s) is a %s, not a primary: Redlock needs independent primaries", ns.Node, ns.Addr, ns.Role))
		}
		if ns.Admission == string(redlock.AdmissionMismatch) {
			r.Warnings = append(r.Warnings, mismatchWarning(ns, r.Settings))
		}
	}
}

// mismatchWarning says why a node with other settings grants nothing to
// clients with these settings, and what to do.
func mismatchWarning(ns nodeStatus, settings string) string {
	switch {
	case ns.Retired:
		return fmt.Sprintf("node %d (%s) was retired by a reconfiguration to the settings %q: no client gets a lock from it; take it out of the node list", ns.Node, ns.Addr, ns.ReconfiguringTo)
	case ns.ReconfiguringTo != "":
		return fmt.Sprintf("node %d (%s) is being reconfigured to the settings %q: clients with %q get no lock from it; run them with the new settings", ns.Node, ns.Addr, ns.ReconfiguringTo, settings)
	}
	return fmt.Sprintf("node %d (%s) keeps the settings %q, not %q: clients with these settings get no lock from it", ns.Node, ns.Addr, ns.Settings, settings)
}
