// Package suite runs the benchmark's scenarios against five local Redis
// nodes and returns one Result per scenario and implementation.
//
// Every scenario interleaves the implementations in blocks (A B C D, B C D
// A, ...) so that a slow spell of a shared machine hits all of them alike;
// compare the ratios taken inside one run rather than absolute numbers.
package suite

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
)

// Scenario names, as the report and the JSON carry them (docs/performance.md).
const (
	Uncontended       = "uncontended"
	UncontendedFenced = "uncontended-fenced"
	SlowNode          = "slow-node"
	TwoDown           = "two-down"
	ThreeDown         = "three-down"
	Contended         = "contended"
	ContendedSeparate = "contended-separate"
	ManyKeys          = "many-keys"
	RenewMany         = "renew-many"
)

// RenewFew is renew-many's smaller run (RenewFewLeases leases), reported
// as a scenario of its own.
const RenewFew = "renew-few"

// All lists the scenarios --scenarios accepts, in the order they run.
// uncontended and uncontended-fenced run together (their rows are
// interleaved, so that their ratio is taken on one stretch of the
// machine); contended runs contended-separate too, and contended-separate
// alone runs it and the redsync rows it is compared with.
var All = []string{Uncontended, UncontendedFenced, SlowNode, TwoDown, ThreeDown, Contended, ContendedSeparate, ManyKeys, RenewMany}

// Config sets the size of a run.
type Config struct {
	Quick bool
	TTL   time.Duration // lock ttl for every implementation (redsync's default expiry: 8s)
	Log   io.Writer     // progress lines
	// Scenarios to run (names from All); empty: all.
	Scenarios []string
	// RenewSizes are the counts of leases, and their ttl, that renew-many
	// holds on one quorumlock Client, one row each; empty: RenewLeases at
	// RenewTTL.
	RenewSizes []RenewSize
	// HeldProfile, when set, is called in each renew run once every lease
	// is held, with the run's name (the benchmark writes heap and
	// goroutine profiles there: --heldprofile).
	HeldProfile func(run string)
}

func (c Config) want(s string) bool { return len(c.Scenarios) == 0 || slices.Contains(c.Scenarios, s) }

func (c Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// pick returns quick or full by mode.
func pick[T any](c Config, quick, full T) T {
	if c.Quick {
		return quick
	}
	return full
}

// Run runs the selected scenarios on ns (five nodes) and returns their
// results, and the checks of the targets those results allow. It stops
// early, with what it has, when ctx ends. The fault scenarios freeze nodes
// with Pause and resume every node before they return.
func Run(ctx context.Context, cfg Config, ns []*servers.RedisProcess) ([]Result, error) {
	addrs := make([]string, len(ns))
	for i, n := range ns {
		addrs[i] = n.Addr()
	}
	run := fmt.Sprintf("qlbench:%d", time.Now().UnixNano())
	var out []Result
	steps := []struct {
		name string
		f    func(context.Context, Config, []*servers.RedisProcess, []string, string) ([]Result, error)
	}{
		{Uncontended, uncontended},
		{SlowNode, slowNode},
		{TwoDown, twoDown},
		{ThreeDown, threeDown},
		{Contended, contended},
		{ManyKeys, manyKeys},
		{RenewMany, renewMany},
	}
	if err := bootstrap(ctx, cfg, addrs); err != nil {
		return nil, err
	}
	for _, s := range steps {
		if !cfg.want(s.name) && !(s.name == Contended && cfg.want(ContendedSeparate)) &&
			!(s.name == Uncontended && cfg.want(UncontendedFenced)) {
			continue
		}
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		cfg.logf("scenario %s", s.name)
		rs, err := s.f(ctx, cfg, ns, addrs, run+":"+s.name)
		thawAll(ns)
		out = append(out, rs...)
		if err != nil {
			return out, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return out, nil
}

// bootstrap admits the brand-new nodes at once (Client.Bootstrap), as an
// operator does for a new deployment; otherwise quorumlock's first Lock
// would wait out the restart quarantine (the max ttl) in the first
// scenario's warm-up.
func bootstrap(ctx context.Context, cfg Config, addrs []string) error {
	ql, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL)
	if err != nil {
		return err
	}
	defer ql.Close()
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := ql.C.Bootstrap(bctx); err != nil {
		return fmt.Errorf("admitting the new nodes: %w", err)
	}
	return nil
}
