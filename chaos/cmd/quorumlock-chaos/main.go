// Command quorumlock-chaos runs the chaos suite (docs/chaos.md): it starts
// its own redis-server, PostgreSQL and etcd servers, runs worker processes
// that increment a counter under the lock, injects faults on a seeded
// schedule and checks the history for what must never happen.
//
// It is a binary of its own, in the chaos module, so that the quorumlock
// CLI links none of the suite's dependencies (etcd, gRPC, Toxiproxy,
// porcupine, Prometheus). Its workers are this same binary, started with
// the hidden first argument "worker".
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/quorumlock/quorumlock/chaos"
	"github.com/quorumlock/quorumlock/internal/flagdoc"
)

// Exit statuses.
const (
	exitOK          = 0
	exitVerdict     = 1 // a run did not show what it must, or the suite could not run
	exitUsage       = 2 // bad flags or arguments; nothing was started
	exitInterrupted = 130
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status. The first SIGINT or SIGTERM cancels the
// suite, which then stops its servers and reports the runs finished so far
// (context.Cause names the signal); a second one ends the process.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)
	if len(args) > 0 && args[0] == workerArg {
		return workerMain(ctx, stdout, stderr)
	}
	return suiteMain(ctx, args, stdout, stderr)
}

type chaosConfig struct {
	profile   string
	backend   string
	json      string
	markdown  string
	history   string
	poll      time.Duration
	election  bool
	transfers bool
	duration  time.Duration
	run       string
	seed      uint64
	seedSet   bool
	topo      string
	faults    string
	fencing   string
	pgPort    int
	redis     int
}

func chaosUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: quorumlock-chaos [--profile quick|full|smoke|soak] [--duration D] [--backend local|compose] [--json FILE] [--seed N] [flags]

Starts its own redis-server and PostgreSQL processes on loopback ports,
runs worker processes that increment a PostgreSQL counter under the lock,
injects one fault per run (see docs/chaos.md) and checks the history for
lost updates, mutual-exclusion overlaps, tokens accepted out of order and
linearizability of the lock. Prints a table, and writes a JSON and a
Markdown report (with an SVG plot) when asked. Every run is seeded; the
suite's seed is printed and --seed reproduces it. Nothing is left running
afterwards, also after Ctrl-C.

Profiles: smoke (about 1-2 minutes, what CI runs), quick (one scenario per
row of the failure table, a few minutes), full (8 workers, 10,000 sections
per run, stalls at 0.1%, 1% and 5%, 5 runs each: hours), soak (the
randomized multi-client nemesis for --duration, one minute by default:
make soak).

Flags:
`)
	flagdoc.Print(w, fs, nil)
	fmt.Fprint(w, `
Exit codes:
  0    every run showed what it must
  1    a run did not (see the FAIL lines), or the suite could not run
  2    usage error: unknown profile, backend, topology, fault or mode
  130  interrupted; the runs finished so far are still reported
`)
}

func parseChaos(args []string, stdout, stderr io.Writer) (*chaosConfig, int, bool) {
	cc := &chaosConfig{}
	fs := flag.NewFlagSet("quorumlock-chaos", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cc.profile, "profile", "quick", "`name` of the profile: "+strings.Join(chaos.Profiles, ", "))
	fs.StringVar(&cc.backend, "backend", "local", "where the servers run: local (child processes on loopback) or compose (containers from the locally built or official images)")
	fs.StringVar(&cc.json, "json", "", "write the JSON report to `file`")
	fs.StringVar(&cc.run, "run", "", "only runs whose name contains `text` (names as the table prints them, e.g. stall=0.1%)")
	fs.DurationVar(&cc.duration, "duration", 0, "how long the soak profile's nemesis runs, in all (e.g. 1h; default 1m); longer than 10m is split into runs of 10m")
	fs.BoolVar(&cc.election, "election", false, "keep the runs on redlock topologies whose fault leaves the workers alone, with every worker a candidate in one leader election (redlock/election) instead of a Lock caller")
	fs.BoolVar(&cc.transfers, "transfers", false, "keep the runs on redlock topologies whose fault leaves the workers alone, with every section a transfer between two accounts locked at once (Client.LockAll), fenced per account")
	fs.DurationVar(&cc.poll, "poll", 0, "keep only the stall runs, and have their waiters poll TryLock every `interval` (e.g. 100ms) instead of waiting in Lock")
	fs.StringVar(&cc.history, "history", "", "write each run's critical sections to `dir` as CSV, one file per run")
	fs.StringVar(&cc.markdown, "markdown", "", "write a Markdown report to `file`, and its plot next to it (.svg)")
	seed := fs.String("seed", "", "the suite's seed, `N` (default: random, printed)")
	fs.StringVar(&cc.topo, "topology", "", "only runs on these `topologies`, comma-separated: "+strings.Join(chaos.TopologyNames(), ", "))
	fs.StringVar(&cc.faults, "fault", "", "only runs with these `faults`, comma-separated: "+strings.Join(chaos.FaultNames(), ", "))
	fs.StringVar(&cc.fencing, "fencing", "", "only runs with these fencing `modes`, comma-separated: "+strings.Join(chaos.FencingModes(), ", "))
	fs.IntVar(&cc.pgPort, "postgres-port", 0, "PostgreSQL's `port` (default: a free one)")
	fs.IntVar(&cc.redis, "redis-port", 0, "first Redis `port`; a run's nodes take the next ones (default: free ones)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			chaosUsage(stdout, fs)
			return nil, exitOK, false
		}
		return nil, usageError(stderr, err), false
	}
	if fs.NArg() > 0 {
		return nil, usageError(stderr, fmt.Errorf("unexpected argument %q", fs.Arg(0))), false
	}
	if *seed != "" {
		n, err := strconv.ParseUint(*seed, 10, 64)
		if err != nil {
			return nil, usageError(stderr, fmt.Errorf("--seed %q: want a non-negative integer", *seed)), false
		}
		cc.seed, cc.seedSet = n, true
	}
	switch cc.backend {
	case "local":
	case "compose":
	default:
		return nil, usageError(stderr, fmt.Errorf("unknown backend %q (want local or compose)", cc.backend)), false
	}
	for _, p := range []int{cc.pgPort, cc.redis} {
		if p < 0 || p > 65535 {
			return nil, usageError(stderr, fmt.Errorf("invalid port %d", p)), false
		}
	}
	return cc, 0, true
}

func usageError(w io.Writer, err error) int {
	fmt.Fprintf(w, "quorumlock-chaos: %v\nRun \"quorumlock-chaos --help\" for usage.\n", err)
	return exitUsage
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func suiteMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cc, code, ok := parseChaos(args, stdout, stderr)
	if !ok {
		return code
	}
	prof, err := chaos.LookupProfile(cc.profile)
	if err == nil {
		prof, err = prof.Filter(splitList(cc.topo), splitList(cc.faults), splitList(cc.fencing))
	}
	if err == nil && cc.duration != 0 {
		// Before --run, which may pick one of the runs a long soak is
		// split into (#3).
		prof, err = prof.Lasting(cc.duration)
	}
	if err == nil {
		prof, err = prof.Named(cc.run)
	}
	if err == nil {
		prof, err = prof.Polling(cc.poll)
	}
	if err == nil {
		prof, err = prof.Electing(cc.election)
	}
	if err == nil && cc.election && cc.transfers {
		err = errors.New("--election and --transfers each give the workers a style; pick one")
	}
	if err == nil {
		prof, err = prof.Transferring(cc.transfers)
	}
	if err != nil {
		return usageError(stderr, errors.New(strings.TrimPrefix(err.Error(), "chaos: ")))
	}
	if !cc.seedSet {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cc.seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock-chaos: cannot find my own binary to start workers: %v\n", err)
		return exitVerdict
	}
	var b chaos.Backend
	if cc.backend == "compose" {
		cb, err := chaos.NewComposeBackend()
		if err != nil {
			fmt.Fprintf(stderr, "quorumlock-chaos: %v\n", err)
			return exitVerdict
		}
		b = cb
	} else {
		lb, err := chaos.NewLocalBackend()
		if err != nil {
			fmt.Fprintf(stderr, "quorumlock-chaos: %v\n", err)
			return exitVerdict
		}
		lb.PostgresPort, lb.RedisBasePort = cc.pgPort, cc.redis
		b = lb
	}
	defer func() {
		if err := b.Close(); err != nil {
			fmt.Fprintf(stderr, "quorumlock-chaos: stopping the servers: %v\n", err)
		}
	}()
	redis.SetLogger(quietRedis{})

	fmt.Fprintf(stdout, "quorumlock-chaos: profile %s, %d runs, backend %s, seed %d\n", prof.Name, len(prof.Runs), b.Name(), cc.seed)
	opts := chaos.Options{
		Backend:       b,
		WorkerCommand: func() (*exec.Cmd, error) { return exec.Command(self, workerArg), nil },
		Log:           stdout,
		History:       cc.history,
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		opts.Progress = stderr
	}
	rep, runErr := chaos.Run(ctx, prof, cc.seed, opts)
	if rep == nil {
		fmt.Fprintf(stderr, "quorumlock-chaos: %v\n", runErr)
		return exitVerdict
	}
	fmt.Fprintln(stdout)
	if err := chaos.WriteTable(stdout, rep); err != nil {
		return exitVerdict
	}
	if err := writeReports(cc, rep); err != nil {
		fmt.Fprintf(stderr, "quorumlock-chaos: %v\n", err)
		return exitVerdict
	}
	failed := len(rep.Failed())
	fmt.Fprintf(stdout, "\n%d of %d runs showed what they must; seed %d reproduces this suite.\n", len(rep.Runs)-failed, len(rep.Runs), cc.seed)
	if n := len(rep.FailedComparisons()); n > 0 {
		fmt.Fprintf(stdout, "%d stall rates missed the published figures by more than %gx.\n", n, chaos.PublishedTolerance)
		failed += n
	}
	switch {
	case runErr != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "quorumlock-chaos: interrupted (%v); reported the runs finished so far\n", context.Cause(ctx))
		return exitInterrupted
	case runErr != nil:
		fmt.Fprintf(stderr, "quorumlock-chaos: %v\n", runErr)
		return exitVerdict
	case failed > 0:
		return exitVerdict
	}
	return exitOK
}

func writeReports(cc *chaosConfig, rep *chaos.Report) error {
	if cc.json != "" {
		if err := writeFile(cc.json, func(w io.Writer) error { return chaos.WriteJSON(w, rep) }); err != nil {
			return err
		}
	}
	if cc.markdown != "" {
		svg := ""
		if chaos.HasStallRuns(rep) {
			svgPath := strings.TrimSuffix(cc.markdown, filepath.Ext(cc.markdown)) + ".svg"
			if err := writeFile(svgPath, func(w io.Writer) error { return chaos.WriteSVG(w, rep) }); err != nil {
				return err
			}
			svg = filepath.Base(svgPath)
		}
		if err := writeFile(cc.markdown, func(w io.Writer) error { return chaos.WriteMarkdown(w, rep, svg) }); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, fill func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if err := fill(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
