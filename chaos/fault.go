package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// fault is one thing the suite can break, and everything the suite knows
// about it: its name and what it does, where it applies, the runs each
// profile makes of it with what they must show, and the hooks that carry
// it out. Each fault registers itself from its own file (fault_*.go), so
// adding one touches that file and its test; the profiles, the name lists
// and the runner ask the registry and never compare fault names.
type fault struct {
	name string
	doc  string
	// rank is the fault's place in the profiles and the report; ranks are
	// unique. Leave gaps, so a new fault can go between two others.
	rank int
	// topologies are those the fault applies to.
	topologies []string
	// noQuarantine turns the clients' restart quarantine off, for the runs
	// that show what happens without it.
	noQuarantine bool
	// pollable lets --poll make the waiters of its runs poll TryLock.
	pollable bool
	// runs are the fault's runs in each profile, by profile name, with
	// what each must show. register fills in their Fault.
	runs map[string][]Scenario

	// The hooks, in the order a run calls them; nil means nothing to do.

	// nodes adjusts the lock nodes' settings before the servers start.
	nodes func(specs []RedisSpec)
	// worker adjusts worker w's configuration: its gates and limits.
	worker func(w int, cfg *workerConfig)
	// prepare acts after the warm-up lock, before the workers start.
	prepare func(ctx context.Context, e *env) error
	// script performs the fault while the workers run. Its context ends
	// when the last worker is done.
	script func(ctx context.Context, e *env) error
	// judge checks what the expectations cannot express, once the run is
	// scored: each string it returns fails the run.
	judge func(e *env, r *Result, h *history, stats []*workerStats) []string
}

// registry holds the faults by name and in rank order.
type registry struct {
	byName  map[string]*fault
	ordered []*fault
}

// faults is the suite's registry; fault_*.go fill it from init.
var faults registry

// register adds f to the suite's registry. A malformed entry is a
// programming error in this package, found as soon as it loads.
func register(f *fault) {
	if err := faults.add(f); err != nil {
		panic(err)
	}
}

// add checks f and adds it, keeping rank order.
func (r *registry) add(f *fault) error {
	if err := f.check(); err != nil {
		return err
	}
	if _, dup := r.byName[f.name]; dup {
		return fmt.Errorf("chaos: fault %q registered twice", f.name)
	}
	for _, o := range r.ordered {
		if o.rank == f.rank {
			return fmt.Errorf("chaos: faults %q and %q share rank %d", o.name, f.name, f.rank)
		}
	}
	for _, runs := range f.runs {
		for i := range runs {
			runs[i].Fault = f.name
		}
	}
	if r.byName == nil {
		r.byName = map[string]*fault{}
	}
	r.byName[f.name] = f
	i, _ := slices.BinarySearchFunc(r.ordered, f.rank, func(o *fault, rank int) int { return o.rank - rank })
	r.ordered = slices.Insert(r.ordered, i, f)
	return nil
}

// check finds what would make f's runs fail for reasons other than the
// fault: missing names, unknown topologies, profiles or fencing modes,
// and runs on topologies the fault does not apply to.
func (f *fault) check() error {
	var errs []error
	if f.name == "" || strings.TrimSpace(f.name) != f.name || strings.ContainsAny(f.name, "/, ") {
		errs = append(errs, fmt.Errorf("chaos: fault name %q: want a non-empty name without spaces, commas or slashes", f.name))
	}
	if f.doc == "" {
		errs = append(errs, fmt.Errorf("chaos: fault %q has no doc", f.name))
	}
	if f.rank <= 0 {
		errs = append(errs, fmt.Errorf("chaos: fault %q has rank %d, want > 0", f.name, f.rank))
	}
	if len(f.topologies) == 0 {
		errs = append(errs, fmt.Errorf("chaos: fault %q applies to no topology", f.name))
	}
	for _, t := range f.topologies {
		if lookupTopology(t) == nil {
			errs = append(errs, fmt.Errorf("chaos: fault %q: unknown topology %q", f.name, t))
		}
	}
	for p, runs := range f.runs {
		if !slices.Contains(Profiles, p) {
			errs = append(errs, fmt.Errorf("chaos: fault %q: unknown profile %q", f.name, p))
		}
		for _, s := range runs {
			if !slices.Contains(f.topologies, s.Topology) {
				errs = append(errs, fmt.Errorf("chaos: fault %q: a %s run on %q, a topology it does not apply to", f.name, p, s.Topology))
			}
			if t := lookupTopology(s.Topology); t != nil && t.inTransaction() && s.Fencing != "none" {
				errs = append(errs, fmt.Errorf("chaos: fault %q: a %s run on %s with fencing %q: a lock in the transaction has no token", f.name, p, s.Topology, s.Fencing))
			}
			if !slices.Contains(fencingModes, s.Fencing) {
				errs = append(errs, fmt.Errorf("chaos: fault %q: a %s run with unknown fencing mode %q", f.name, p, s.Fencing))
			}
			if t := lookupTopology(s.Topology); s.Workers < 1 || s.Sections < 1 || s.TTL < 0 || (s.TTL == 0) != (t != nil && t.ttl == 0) {
				errs = append(errs, fmt.Errorf("chaos: fault %q: a %s run with %d workers, %d sections, TTL %v", f.name, p, s.Workers, s.Sections, s.TTL))
			}
		}
	}
	return errors.Join(errs...)
}

// appliesTo reports whether f can run on topology t.
func (f *fault) appliesTo(t string) bool { return slices.Contains(f.topologies, t) }

// lookupFault returns the registered fault called name, or nil.
func lookupFault(name string) *fault { return faults.byName[name] }

// FaultNames returns the names of the registered faults, sorted.
func FaultNames() []string {
	names := make([]string, 0, len(faults.ordered))
	for _, f := range faults.ordered {
		names = append(names, f.name)
	}
	slices.Sort(names)
	return names
}
