package suite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
)

const (
	// RenewLeases is the number of leases renew-many holds at once.
	RenewLeases = 1000
	// RenewFewLeases is the smaller count of the renew-few run, which
	// shows whether renewal traffic grows with the number of leases.
	RenewFewLeases = 100
	// RenewTTL is the lease ttl in the renew scenarios (not --ttl): short,
	// so that a window sees many renewal periods.
	RenewTTL = 3 * time.Second
)

// RenewPeriod is how often a lease of ttl is renewed: ttl/3, the interval
// redlock's Do documents (and the one the redsync holders use). Round trips
// are counted per period of this length.
func RenewPeriod(ttl time.Duration) time.Duration { return ttl / 3 }

// renewMany holds many leases at once on one client and measures the
// window in which all of them are held: quorumlock with 100 leases
// (renew-few) and with 1000 under Do, and redsync with 1000 Mutexes each
// extended by a goroutine of its own every ttl/3 (redsync has no Do).
func renewMany(ctx context.Context, cfg Config, _ []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	window, rsWindow, fewWindow := pick(cfg, 6*time.Second, 30*time.Second), pick(cfg, 3*time.Second, 10*time.Second), pick(cfg, 3*time.Second, 6*time.Second)
	probes, closeProbes := openProbes(addrs)
	defer closeProbes()
	type run struct {
		scenario, impl, variant string
		leases                  int
		ttl, window             time.Duration
		hold                    func(*impl.Trips, string) (holdFn, func() int, func(), error)
		keep                    func(*impl.Trips, string) (holdFn, func() []string, func(), error) // instead of hold
	}
	runs := []run{
		{RenewFew, impl.Quorumlock, fmt.Sprintf("%d leases under Do, ttl %v", RenewFewLeases, RenewTTL), RenewFewLeases, RenewTTL, fewWindow, qlHold(addrs, RenewTTL), nil},
		{RenewMany, impl.Redsync, fmt.Sprintf("%d Mutexes, ExtendContext every %v", RenewLeases, RenewPeriod(RenewTTL)), RenewLeases, RenewTTL, rsWindow, rsHold(addrs), nil},
	}
	sizes := cfg.RenewSizes
	if len(sizes) == 0 {
		sizes = []RenewSize{{RenewLeases, RenewTTL}}
	}
	for _, sz := range sizes {
		w := window
		if sz.Leases > RenewLeases {
			// More leases take longer to take; the window is longer too,
			// so that it sees many renewal periods of the longer ttls.
			w = pick(cfg, 10*time.Second, time.Minute)
		}
		runs = append(runs,
			run{RenewMany, impl.Quorumlock, fmt.Sprintf("%d leases under Do, ttl %v", sz.Leases, sz.TTL), sz.Leases, sz.TTL, w, qlHold(addrs, sz.TTL), nil},
			run{RenewMany, impl.Quorumlock, fmt.Sprintf("%d leases under KeepRenewed, ttl %v", sz.Leases, sz.TTL), sz.Leases, sz.TTL, w, nil, qlKeep(addrs, sz.TTL)})
	}
	var out []Result
	for i, r := range runs {
		if ctx.Err() != nil {
			break
		}
		cfg.logf("  %s %s: %d leases, ttl %v, %v window", r.scenario, r.impl, r.leases, r.ttl, r.window)
		trips := impl.NewTrips(len(addrs))
		prefix := fmt.Sprintf("%s:%s:%s:%d", key, r.scenario, r.impl, i)
		var hold holdFn
		var end func() []string
		var late func() int
		var closeFn func()
		var err error
		if r.keep != nil {
			hold, end, closeFn, err = r.keep(trips, prefix)
		} else {
			hold, late, closeFn, err = r.hold(trips, prefix)
		}
		if err != nil {
			return out, err
		}
		var held func()
		if cfg.HeldProfile != nil {
			name := fmt.Sprintf("%s-%s-%d", r.scenario, r.impl, r.leases)
			held = func() { cfg.HeldProfile(name) }
		}
		c, err := renewWindow(ctx, r.leases, r.window, RenewPeriod(r.ttl), trips, probes, hold, end, held)
		if late != nil {
			c.ranOutAfterFn = late()
		}
		if err == nil {
			// Before Close: the client sends the releases still queued.
			err = keysFreed(ctx, &c, probes, prefix, r.leases, r.ttl+5*time.Second)
		}
		closeFn()
		if err != nil {
			return out, err
		}
		if r.keep == nil {
			// hold keeps a goroutine per lease, which runs fn (Do) or
			// extends (redsync): measure what that goroutine costs when it
			// only waits, right after, started the same way.
			if c.fnBytes, c.fnGoroutines, err = idleCost(ctx, r.leases, RenewPeriod(r.ttl), probes); err != nil {
				return out, err
			}
		}
		res := renewResult(r.scenario, r.impl, r.variant, c)
		if n := res.Renew.RanOutAfterFn; n > 0 {
			cfg.logf("    %d leases ran out after fn returned, before their release went out (no loss)", n)
		}
		cfg.logf("    lease keys left on the nodes when the release phase ended: %d; none left after %s", res.Renew.KeysLeftAfterRelease, goneText(res.Renew.KeysGoneAfterS))
		for _, l := range res.Renew.LostWhy {
			cfg.logf("    lost %d (learned: %s): %s", l.Count, l.Phase, l.Reason)
		}
		out = append(out, res)
	}
	return out, ctx.Err()
}

// renewResult is the Result of one renew run.
func renewResult(scenario, implName, variant string, c renewCounts) Result {
	res := Result{Scenario: scenario, Impl: implName, Variant: variant, Samples: len(c.lat), Errors: c.errs}
	if c.first != nil {
		res.FirstError = c.first.Error()
	}
	rf := RenewFigures(c)
	res.Renew = &rf
	res.OpsPerSec = rf.SentCmdsPerSec
	res.Leases, res.LeasesLost = ptr(rf.Leases), ptr(rf.Lost)
	res.NodeCmdsPerLeasePeriod = ptr(rf.NodeCmdsPerLeasePeriod)
	res.ClientBytesPerLease, res.GoroutinesPerLease = ptr(rf.ClientBytesPerLease), ptr(rf.GoroutinesPerLease)
	res.ClientBytesBeyondFn = ptr(rf.ClientBytesBeyondFn)
	if len(c.lat) > 0 {
		res.P50us = us(pct(c.lat, 0.50))
		res.P99us = us(pct(c.lat, 0.99))
		res.MaxUs = us(c.lat[len(c.lat)-1])
	}
	return res
}

// RenewSize is one renew-many run of quorumlock: Leases held at once on
// one Client under Do, each with TTL.
type RenewSize struct {
	Leases int
	TTL    time.Duration
}

// ParseRenewSizes reads --renew-leases: comma-separated counts, each
// with an optional "@ttl" (default RenewTTL), e.g. "1000,10000,100000@30s".
func ParseRenewSizes(s string) ([]RenewSize, error) {
	var out []RenewSize
	for f := range strings.SplitSeq(s, ",") {
		n, t, hasTTL := strings.Cut(strings.TrimSpace(f), "@")
		leases, err := strconv.Atoi(n)
		if err != nil || leases <= 0 {
			return nil, fmt.Errorf("renew leases %q: want a count above 0, with an optional @ttl", f)
		}
		size := RenewSize{Leases: leases, TTL: RenewTTL}
		if hasTTL {
			if size.TTL, err = time.ParseDuration(t); err != nil || size.TTL < 30*time.Millisecond {
				return nil, fmt.Errorf("renew leases %q: want a ttl of at least 30ms after @", f)
			}
		}
		out = append(out, size)
	}
	return out, nil
}

// goneText says when the nodes were back to their keys (-1: never seen).
func goneText(s float64) string {
	if s < 0 {
		return "more than the ttl and 5 s (not seen)"
	}
	return fmt.Sprintf("%.1f s", s)
}
