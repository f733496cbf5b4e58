// Command model runs the protocol's model checker (`make model`): every
// interleaving of each scenario of redlock/internal/model, deeper than
// the tests do, and prints the states it explored, the depth, the time
// and the bounds. It exits 1 on a counterexample, which it prints.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"

	"github.com/quorumlock/quorumlock/redlock/internal/model"
)

func main() { os.Exit(run()) }

func run() int {
	extra := flag.Int("extra", 1, "steps beyond each scenario's CI depth")
	only := flag.String("scenario", "", "comma-separated scenario names (default: all)")
	maxStates := flag.Int("max-states", 0, "stop a scenario after this many states (0: no limit)")
	workers := flag.Int("workers", runtime.GOMAXPROCS(0), "goroutines that expand each level's states (the result does not depend on it)")
	known := flag.Bool("known", false, "run the scenarios with a guard of the protocol taken out (model.KnownDefects) instead: each must find its counterexample")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memProfile := flag.String("memprofile", "", "write a heap profile to this file at the end of the run")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if *memProfile != "" {
		defer func() {
			f, err := os.Create(*memProfile)
			if err == nil {
				err = pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}()
	}
	// The explorer keeps every state it reached; collecting less often
	// trades memory for time.
	debug.SetGCPercent(400)

	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	failed := false
	total := 0
	scenarios := model.Scenarios()
	if *known {
		scenarios = model.KnownDefects()
	}
	for _, s := range scenarios {
		if len(want) > 0 && !want[s.Name] {
			continue
		}
		cfg := s.Config
		cfg.Depth += *extra
		cfg.MaxStates = *maxStates
		cfg.Workers = *workers
		fmt.Printf("%s: %s\n  bounds: %s\n", s.Name, s.Checks, bounds(cfg))
		r, err := model.Explore(cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		total += r.States
		fmt.Printf("  %s\n", strings.ReplaceAll(r.String(), "\n", "\n  "))
		if !r.Complete || (r.Violation != "") != *known {
			failed = true
		}
	}
	fmt.Printf("states explored: %d\n", total)
	if failed {
		return 1
	}
	return 0
}

func bounds(c model.Config) string {
	var cs []string
	for _, cc := range c.Clients {
		s := fmt.Sprintf("ttl %v max %v drift factor %g, %d attempt(s)", cc.TTL, cc.MaxTTL, cc.Factor, cc.Attempts)
		if cc.Fencing {
			s += ", fencing"
		}
		if cc.Extends > 0 {
			s += fmt.Sprintf(", %d extend(s) per lease", cc.Extends)
		}
		if cc.NoQuarantine {
			s += ", no restart quarantine"
		}
		switch {
		case len(cc.Servers) > 0 && cc.Probed == nil:
			s += fmt.Sprintf(", entries to nodes %v", cc.Servers)
		case len(cc.Servers) > 0:
			s += fmt.Sprintf(", entries to nodes %v (%v verified at New)", cc.Servers, cc.Probed)
		}
		if cc.AfterReconfigure {
			s += ", started once a reconfiguration to its settings writes"
		}
		if cc.Key != "" {
			s += ", on key " + cc.Key
		}
		if cc.Keys != nil {
			s += fmt.Sprintf(", LockAll over %v (attempts and extends per key)", cc.Keys)
		}
		if cc.Repoint != nil {
			s += fmt.Sprintf(", entry %d re-pointed to node %d at any moment", cc.Repoint[0], cc.Repoint[1])
		}
		cs = append(cs, s)
	}
	out := fmt.Sprintf("%d nodes; clients [%s]; depth %d; real time %d ticks of %v; node clocks up to %d tick(s) ahead (%d of them at most, 0: all), client clocks %d; %d data loss(es); %d pending call(s) per client",
		c.Nodes, strings.Join(cs, "; "), c.Depth, c.MaxTime, model.Unit, c.Skew, c.SkewedNodes, c.ClientSkew, c.Wipes, c.Pendings)
	if c.Confirm {
		out += "; admission with confirm"
	}
	for _, rc := range c.Reconfigs {
		if rc.ReadFrom {
			out += fmt.Sprintf("; Reconfigure from %v (old settings read from the nodes) to client %d's", rc.From, rc.To)
			continue
		}
		out += fmt.Sprintf("; Reconfigure from %v (max ttl %v, drift factor %g) to client %d's", rc.From, rc.MaxTTL, rc.Factor, rc.To)
	}
	if c.ReconfigRuns > 0 {
		out += fmt.Sprintf("; %d Reconfigure run(s)", c.ReconfigRuns)
	}
	if len(c.Prefix) > 0 {
		out += fmt.Sprintf("; a prefix of %d steps", len(c.Prefix))
	}
	if c.Bootstraps > 0 {
		out += fmt.Sprintf("; %d Bootstrap run(s)", c.Bootstraps)
	}
	if c.Proofs > 0 {
		out += fmt.Sprintf("; %d identity proof(s) per client", c.Proofs)
	}
	if c.RepliesAtOnce {
		out += "; replies arrive at once"
	}
	if c.NoGiveUps {
		out += "; no attempt given up"
	}
	if c.Live {
		out += "; liveness checked"
	}
	if c.NoCanonicalOrder {
		out += "; LockAll takes its keys in the listed order"
	}
	if c.SetDeadlineFromLast {
		out += "; a set trusted until its last key's deadline"
	}
	if c.KeepPartialHolds {
		out += "; a LockAll that gives up releases nothing"
	}
	if c.CheckLeftovers {
		out += "; no key left behind by an ended LockAll"
	}
	if c.ClockJumps {
		out += "; assumption 1 lifted (clocks jump): token invariants only"
	}
	return out
}
