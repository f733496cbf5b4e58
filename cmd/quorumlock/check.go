package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("check", subcommand{
		summary: "check every node's settings that the locks' safety depends on, and say whether the deployment is fit",
		run:     checkMain,
	})
}

// Exit statuses of check by verdict.
const (
	exitCheckDegraded    = 3
	exitCheckUnavailable = 4
	exitCheckUnsafe      = 5
)

func checkExit(v redlock.CheckVerdict) int {
	switch v {
	case redlock.CheckOK:
		return exitOK
	case redlock.CheckDegraded:
		return exitCheckDegraded
	case redlock.CheckUnavailable:
		return exitCheckUnavailable
	}
	return exitCheckUnsafe
}

// checkProblem and checkNode are the JSON interface of "check --json": add
// fields, do not rename them.
type checkProblem struct {
	Severity string `json:"severity"` // unsafe, degraded or note
	What     string `json:"what"`
	Fix      string `json:"fix"`
}

type checkNode struct {
	Node            int            `json:"node"`
	Addr            string         `json:"addr"`
	Fit             bool           `json:"fit"`
	Error           string         `json:"error,omitempty"`
	RTTMS           float64        `json:"rtt_ms"`
	Version         string         `json:"redis_version,omitempty"`
	Role            string         `json:"role,omitempty"`
	Replicas        int            `json:"replicas"`
	Eviction        string         `json:"maxmemory_policy,omitempty"`
	ConfigRead      bool           `json:"config_read"`
	Save            *string        `json:"save,omitempty"` // absent when not read
	AppendOnly      bool           `json:"appendonly"`
	AppendFsync     string         `json:"appendfsync,omitempty"`
	ClockOffsetMS   *float64       `json:"clock_offset_ms,omitempty"` // absent when not read
	Admission       string         `json:"admission"`
	Settings        string         `json:"settings,omitempty"`
	QuarantineLeft  int64          `json:"quarantine_left_ms,omitempty"`
	ReconfiguringTo string         `json:"reconfiguring_to,omitempty"`
	ACLChecked      bool           `json:"acl_checked"`
	Denied          []string       `json:"acl_denied,omitempty"`
	Identity        string         `json:"identity,omitempty"` // absent while not verified
	Problems        []checkProblem `json:"problems"`
}

type checkReport struct {
	Settings string      `json:"settings"`
	Quorum   int         `json:"quorum"`
	Fit      int         `json:"fit"`
	Unsafe   int         `json:"unsafe"`
	Verdict  string      `json:"verdict"` // ok, degraded, unavailable, unsafe
	Summary  string      `json:"summary"`
	Nodes    []checkNode `json:"nodes"`
}

type checkConfig struct {
	readFlags
	keys string
}

func checkUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock check --nodes ADDR,... [--key K,...] [--json] [--timeout D]

Reads every node, in parallel and without writing, for what the locks'
safety and availability depend on: whether it answers and how fast, its
version and role, replicas, maxmemory-policy, RDB snapshots and AOF fsync
policy (when CONFIG GET is allowed), its clock against this machine's,
whether it votes for clients with these settings (--max-ttl) or serves a
quarantine, and (Redis 7 or later) whether the ACL user may run every
command the library runs, on its own keys and on the sample lock keys
given with --key. Each problem comes with what to do.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD, and the variables in [brackets] above.

Exit codes (the verdict):
  0  ok: every node answers, votes for these settings and is set up safely
  1  the report could not be made or written
  2  usage error: bad flags or arguments (no node was contacted)
  3  degraded: a majority can vote, but some nodes cannot (down, refusing
     the credentials, in quarantine, other settings, missing ACL
     permissions, a clock far off)
  4  unavailable: fewer than a majority can vote; no lock can be taken
  5  unsafe: a node has a setting under which a granted lock can be
     forgotten (eviction, RDB snapshots, appendfsync other than always,
     replicas, a replica listed as a node): fix it before relying on the
     lock
  125 two entries reach the same server (the same address twice is a
     usage error, 2)
The report is printed for 0, 3, 4 and 5.
`)
}

func checkMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cc := &checkConfig{}
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cc.register(fs, env, 5*time.Second, "`duration` bound on the whole check; nodes that have not answered by then are reported")
	fs.StringVar(&cc.keys, "key", "", "comma-separated sample lock `keys` to check the ACL user's key patterns against")
	if code, ok := parseFlags(fs, args, env, "check", checkUsage, false, stdout, stderr); !ok {
		return code
	}
	var keys []string
	for k := range strings.SplitSeq(cc.keys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	opts, code, ok := cc.options("check", stderr)
	if !ok {
		return code
	}
	redis.SetLogger(redisLogger{l: newLogger(stderr, false)})

	rep, err := collectCheck(ctx, cc, opts, keys)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock check: %s\n", redact(err.Error()))
		var dup *redlock.DuplicateNodeError
		var in *redlock.InputError
		switch {
		case errors.As(err, &dup):
			return exitRunFailed
		case errors.As(err, &in):
			return exitUsage
		}
		return exitFailure
	}
	return cc.write("check", rep, func(w io.Writer) error { return printCheck(w, rep) }, checkExit(redlock.CheckVerdict(rep.Verdict)), stdout, stderr)
}

func collectCheck(ctx context.Context, cc *checkConfig, opts []*redis.Options, keys []string) (*checkReport, error) {
	ctx, cancel := context.WithTimeout(ctx, cc.timeout.d)
	defer cancel()
	lc, closeLC, err := readOnlyClient(opts, cc.timeout.d, cc.maxTTL.d, redlock.WithLogger(newLogger(io.Discard, false)))
	if err != nil {
		return nil, err
	}
	defer closeLC()
	cr, err := lc.Check(ctx, keys...)
	if err != nil {
		return nil, err
	}
	rep := &checkReport{Settings: cr.Settings, Quorum: cr.Quorum, Fit: cr.Fit, Unsafe: cr.Unsafe, Verdict: string(cr.Verdict), Summary: cr.Summary}
	for i := range cr.Nodes {
		n := &cr.Nodes[i]
		cn := checkNode{Node: n.Node, Addr: opts[i].Addr, Fit: n.Fit(), RTTMS: ms(n.RTT), Version: n.Server.Version, Role: n.Server.Role,
			Replicas: n.Replicas, Eviction: n.Eviction, ConfigRead: n.ConfigRead, AppendOnly: n.AppendOnly, AppendFsync: n.AppendFsync,
			Admission: string(n.Admission), Settings: n.Settings, ReconfiguringTo: n.ReconfiguringTo, ACLChecked: n.ACLChecked, Denied: n.Denied,
			Identity: n.Identity, Problems: []checkProblem{}}
		if n.Err != nil {
			cn.Error = redact(n.Err.Error())
		}
		if n.ConfigRead {
			cn.Save = &n.Save
		}
		if n.ClockRead {
			off := ms(n.ClockOffset)
			cn.ClockOffsetMS = &off
		}
		if n.Admission == redlock.AdmissionQuarantined || n.Admission == redlock.AdmissionReconfiguring {
			cn.QuarantineLeft = n.QuarantineLeft.Milliseconds()
		}
		for _, p := range n.Problems {
			cn.Problems = append(cn.Problems, checkProblem{Severity: string(p.Severity), What: redact(p.What), Fix: p.Fix})
		}
		rep.Nodes = append(rep.Nodes, cn)
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func printCheck(w io.Writer, r *checkReport) error {
	fmt.Fprintf(w, "%d nodes (quorum %d), settings %q\n\n", len(r.Nodes), r.Quorum, r.Settings)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tFIT\tVERSION\tROLE\tRTT\tCLOCK\tEVICTION\tPERSISTENCE\tVOTING")
	for _, n := range r.Nodes {
		fit := "no"
		if n.Fit {
			fit = "yes"
		}
		if n.Error != "" {
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t-\t-\t-\t%s\n", n.Node, n.Addr, fit, n.Admission)
			continue
		}
		clock := "?"
		if n.ClockOffsetMS != nil {
			clock = fmt.Sprintf("%+dms", int64(math.Round(*n.ClockOffsetMS)))
		}
		pers := "?"
		switch {
		case n.Save != nil && *n.Save != "" && n.AppendOnly:
			pers = "rdb+aof " + n.AppendFsync
		case n.Save != nil && *n.Save != "":
			pers = "rdb"
		case n.AppendOnly:
			pers = "aof " + n.AppendFsync
		case n.Save != nil:
			pers = "none"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.1fms\t%s\t%s\t%s\t%s\n", n.Node, n.Addr, fit, n.Version, n.Role, n.RTTMS, clock,
			orDash(n.Eviction), pers, n.Admission)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range r.Nodes {
		for _, p := range n.Problems {
			fmt.Fprintf(w, "\nnode %d (%s) %s: %s\n  fix: %s\n", n.Node, n.Addr, p.Severity, p.What, p.Fix)
		}
	}
	_, err := fmt.Fprintf(w, "\n%s: %s\n", r.Verdict, r.Summary)
	return err
}
