// Command qlbench compares quorumlock with go-redsync/redsync, a
// single-node lock and the network floor, on five redis-server nodes it
// starts itself. It is what `make bench` runs, and what `make build` puts
// in bin/quorumlock-bench; see docs/performance.md.
//
// It lives in its own module (bench/) so that the quorumlock module never
// depends on redsync.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/bench/internal/report"
	"github.com/quorumlock/quorumlock/bench/internal/suite"
	"github.com/quorumlock/quorumlock/internal/flagdoc"
	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/redlock"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("quorumlock-bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	quick := fs.Bool("quick", false, "smaller samples and shorter windows: about one minute instead of four to five")
	jsonPath := fs.String("json", "", "write the results as JSON (docs/performance.md) to `FILE`")
	plotPath := fs.String("plot", "", "write a latency plot to `FILE` (.svg, .png or .pdf)")
	mdPath := fs.String("markdown", "", "write the tables as Markdown to `FILE`")
	scen := fs.String("scenarios", "", "run only these `scenarios`, comma-separated: "+strings.Join(suite.All, ", ")+" (default: all)")
	renewLeases := fs.String("renew-leases", "1000", "the `counts` of leases renew-many holds on one quorumlock Client, one run each, comma-separated, each with an optional @ttl (default 3s), e.g. 1000,10000,100000@30s")
	ttl := fs.Duration("ttl", 8*time.Second, "the lock's ttl (`duration`) for every implementation (redsync's default expiry)")
	redisBin := fs.String("redis-server", "redis-server", "the redis-server `binary` to start the five nodes with")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	traceFile := fs.String("trace", "", "write an execution trace of the whole run to `FILE`")
	heldProfile := fs.String("heldprofile", "", "in each renew run, once every lease is held, write a heap and a goroutine profile to `PREFIX`-<run>.heap and .goroutine")
	countCalls := fs.Bool("count-calls", false, "count the Redis commands each implementation sends per operation (adds a client hook)")
	usage := func(w io.Writer) {
		fmt.Fprint(w, `Usage: quorumlock-bench [--quick] [--scenarios S,...] [--json FILE] [flags]

Starts five redis-server nodes on free loopback ports (no persistence),
runs the scenarios with quorumlock, redsync, a single-node lock and the
network floor interleaved (uncontended also with quorumlock on rueidis
and valkey-go), prints a table of latencies and ratios, the
renewal figures and the checks of the performance targets, with the
machine's load average before and after, and stops the nodes (also on
Ctrl-C).
Exit status: 0 done (targets may have been missed: read the table),
1 error, 2 usage, 130 interrupted.

Flags:
`)
		flagdoc.Print(w, fs, nil)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "quorumlock-bench: %v\nRun \"quorumlock-bench --help\" for usage.\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "quorumlock-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	sizes, err := suite.ParseRenewSizes(*renewLeases)
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock-bench: --renew-leases: %v\n", err)
		return 2
	}
	cfg := suite.Config{Quick: *quick, TTL: *ttl, Log: stderr, RenewSizes: sizes}
	if *heldProfile != "" {
		cfg.HeldProfile = func(run string) { writeHeldProfiles(*heldProfile+"-"+run, stderr) }
	}
	impl.CountCalls.Store(*countCalls)
	if *scen != "" {
		for s := range strings.SplitSeq(*scen, ",") {
			if !contains(suite.All, s) {
				fmt.Fprintf(stderr, "quorumlock-bench: unknown scenario %q (have %s)\n", s, strings.Join(suite.All, ","))
				return 2
			}
			cfg.Scenarios = append(cfg.Scenarios, s)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopSignals := handleSignals(cancel, stderr)
	defer stopSignals()

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			return 1
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			return 1
		}
		defer trace.Stop()
	}

	meta := report.Meta{
		Mode:         map[bool]string{true: "quick", false: "full"}[*quick],
		Started:      time.Now().UTC().Format(time.RFC3339),
		GoVersion:    runtime.Version(),
		GOMAXPROCS:   runtime.GOMAXPROCS(0),
		CPUs:         runtime.NumCPU(),
		RedisVersion: redisVersion(*redisBin),
		TTLms:        ttl.Milliseconds(),
		NodeTimeout:  float64(nodeTimeout(*ttl)) / float64(time.Millisecond),
		LoadBefore:   loadAvg(),
	}
	fmt.Fprintf(stderr, "quorumlock-bench: %s mode, %s, GOMAXPROCS=%d, redis %s, load average before %s\n",
		meta.Mode, meta.GoVersion, meta.GOMAXPROCS, meta.RedisVersion, report.Load(meta.LoadBefore))

	start := time.Now()
	ns, err := startNodes(ctx, *redisBin, 5)
	if err != nil {
		fmt.Fprintln(stderr, "quorumlock-bench:", err)
		return 1
	}
	results, runErr := suite.Run(ctx, cfg, ns)
	if err := servers.StopAll(ns); err != nil {
		fmt.Fprintln(stderr, "quorumlock-bench: stopping the nodes:", err)
	}
	meta.Seconds = time.Since(start).Seconds()
	meta.LoadAfter = loadAvg()

	ts := report.Targets(results, nodeTimeout(*ttl))
	fmt.Fprintln(stdout)
	report.Text(stdout, results, ts)
	fmt.Fprintf(stdout, "\n%s mode, %.0f s; load average (1, 5, 15 min) before %s, after %s\n",
		meta.Mode, meta.Seconds, report.Load(meta.LoadBefore), report.Load(meta.LoadAfter))

	status := 0
	if *jsonPath != "" {
		if err := report.WriteJSON(*jsonPath, report.Doc{Meta: meta, Results: results, Targets: ts}); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			status = 1
		}
	}
	if *mdPath != "" {
		if err := writeMarkdown(*mdPath, meta, results, ts); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			status = 1
		}
	}
	if *plotPath != "" && len(results) > 0 {
		if err := report.Plot(*plotPath, results); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench: plot:", err)
			status = 1
		}
	}
	if runErr != nil {
		if ctx.Err() != nil {
			fmt.Fprintln(stderr, "quorumlock-bench: interrupted; the nodes are stopped")
			return 130
		}
		fmt.Fprintln(stderr, "quorumlock-bench:", runErr)
		return 1
	}
	return status
}

// handleSignals cancels the run on the first SIGINT or SIGTERM so that the
// nodes are thawed and stopped; a terminal's Ctrl-C may reach this process
// twice (directly and relayed by a wrapper that forwards signals), so only
// a third signal ends the process at once (the nodes then die with it).
func handleSignals(cancel context.CancelFunc, stderr io.Writer) (stop func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-ch:
				n++
				if n == 1 {
					fmt.Fprintln(stderr, "quorumlock-bench: stopping (signal again twice to exit at once)")
					cancel()
				}
				if n >= 3 {
					os.Exit(130)
				}
			case <-done:
				return
			}
		}
	}()
	return func() { signal.Stop(ch); close(done) }
}

// startNodes starts n throw-away redis-server processes of the binary bin
// (a path, or a name looked up on PATH) on free loopback ports, without
// persistence, each in its own temporary directory. They die with this
// process, also when it is killed. On error it stops the ones it started.
func startNodes(ctx context.Context, bin string, n int) ([]*servers.RedisProcess, error) {
	var ns []*servers.RedisProcess
	for range n {
		p, err := servers.StartRedisProcess(ctx, servers.RedisConfig{Binary: bin, Persistence: servers.PersistenceNone})
		if err != nil {
			if errors.Is(err, servers.ErrBinaryNotFound) {
				err = fmt.Errorf("%w (install redis-server, or pass --redis-server)", err)
			}
			return nil, errors.Join(err, servers.StopAll(ns))
		}
		ns = append(ns, p)
	}
	return ns, nil
}

func writeMarkdown(path string, m report.Meta, rs []suite.Result, ts []report.Target) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	report.Markdown(f, m, rs, ts)
	return f.Close()
}

// nodeTimeout mirrors redlock's default per-node timeout for ttl.
func nodeTimeout(ttl time.Duration) time.Duration {
	return max(time.Duration(float64(ttl)*redlock.DefaultTimeoutFactor), redlock.DefaultMinNodeTimeout)
}

func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

// loadAvg returns the 1, 5 and 15 minute load averages, or nil where the
// system does not offer /proc/loadavg.
func loadAvg() []float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	l, err := parseLoadAvg(string(b))
	if err != nil {
		return nil
	}
	return l
}

// parseLoadAvg reads the first three fields of /proc/loadavg
// ("0.52 0.58 0.59 1/467 12345").
func parseLoadAvg(s string) ([]float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return nil, fmt.Errorf("loadavg: %q has fewer than 3 fields", s)
	}
	out := make([]float64, 3)
	for i := range out {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, fmt.Errorf("loadavg: field %d: %w", i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// writeHeldProfiles writes the heap (live objects, after a GC) and
// goroutine profiles to prefix.heap and prefix.goroutine.
func writeHeldProfiles(prefix string, stderr io.Writer) {
	runtime.GC()
	for _, p := range []struct{ name, ext string }{{"heap", ".heap"}, {"goroutine", ".goroutine"}} {
		f, err := os.Create(prefix + p.ext)
		if err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
			return
		}
		if err := pprof.Lookup(p.name).WriteTo(f, 0); err != nil {
			fmt.Fprintln(stderr, "quorumlock-bench:", err)
		}
		_ = f.Close()
	}
}
