package suite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/redlock"
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

// holdFn takes lease i and keeps it until stop is closed, then gives it
// up. It calls held once the lease is held, and lost when it learns that
// the lease was lost before the end (expired, taken over, or not renewed
// in time). It returns what failed: taking, renewing or releasing.
type holdFn func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error

// renewCounts is what one renew run saw, as raw differences; RenewFigures
// turns them into the reported figures.
type renewCounts struct {
	leases, held, lost int
	window, period     time.Duration
	sent               []impl.TripCount  // per node, in the window
	node               []nodestats.Stats // per node, in the window
	clientCPU          time.Duration     // this process, in the window
	cpuOK              bool              // clientCPU could be measured
	lockPhase          impl.TripCount    // all nodes, while the leases were being taken
	lockPhaseNode      int64             // executed by the nodes then
	lockPhaseTime      time.Duration     // how long that took
	releasePhase       impl.TripCount    // all nodes, while they were given up
	releasePhaseNode   int64             // executed by the nodes then
	lat                []time.Duration   // round trips in the window
	// What holding the leases added, from before the first was taken to
	// when all were held: this process's live heap and goroutine stacks
	// (after a GC), its goroutines, and the nodes' used_memory.
	clientBytes, goroutines, nodeBytes int64
	errs                               int
	first                              error
}

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
		hold                    func(*impl.Trips, string) (holdFn, func(), error)
		keep                    func(*impl.Trips, string) (holdFn, func() int, func(), error) // instead of hold
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
		var end func() int
		var closeFn func()
		var err error
		if r.keep != nil {
			hold, end, closeFn, err = r.keep(trips, prefix)
		} else {
			hold, closeFn, err = r.hold(trips, prefix)
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
		closeFn()
		if err != nil {
			return out, err
		}
		out = append(out, renewResult(r.scenario, r.impl, r.variant, c))
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

// qlHold holds leases of ttl under quorumlock's Do on one Client.
func qlHold(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func(), error) {
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl)
		if err != nil {
			return nil, nil, err
		}
		hold := func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error {
			ran, gone := false, false
			err := ql.C.Do(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl, func(fctx context.Context, _ *redlock.Lease) error {
				ran = true
				held()
				select {
				case <-stop:
				case <-fctx.Done():
					// fn's ctx ends early only when the lease is lost, or
					// when the whole run is interrupted.
					if ctx.Err() == nil {
						gone = true
						lost()
					}
				}
				return nil
			})
			if ran && !gone && errors.Is(err, redlock.ErrNotHeld) && ctx.Err() == nil {
				lost() // its validity ran out before the release
			}
			if gone && errors.Is(err, redlock.ErrNotHeld) {
				return nil // counted as lost, not as an error
			}
			return err
		}
		return hold, ql.Close, nil
	}
}

// qlKeep takes leases of ttl with quorumlock's Lock on one Client and
// keeps them with Lease.KeepRenewed: hold returns once the lease is
// held, so no goroutine waits per lease. end, once the window is over,
// counts the leases that ended before it (lost) and releases the rest.
func qlKeep(addrs []string, ttl time.Duration) func(*impl.Trips, string) (holdFn, func() int, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func() int, func(), error) {
		ql, err := impl.NewQL(impl.CountedClients(addrs, t), true, ttl)
		if err != nil {
			return nil, nil, nil, err
		}
		var mu sync.Mutex
		var leases []*redlock.Lease
		hold := func(ctx context.Context, i int, held, _ func(), _ <-chan struct{}) error {
			l, err := ql.C.Lock(ctx, fmt.Sprintf("%s:%d", prefix, i), ttl)
			if err != nil {
				return err
			}
			l.KeepRenewed()
			mu.Lock()
			leases = append(leases, l)
			mu.Unlock()
			held()
			return nil
		}
		end := func() int {
			mu.Lock()
			defer mu.Unlock()
			lost := 0
			for _, l := range leases {
				select {
				case <-l.Done():
					lost++
				default:
				}
			}
			work := make(chan *redlock.Lease)
			var wg sync.WaitGroup
			for range 64 {
				wg.Go(func() {
					for l := range work {
						rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						_ = l.Release(rctx) // a lost lease's ErrNotHeld is counted above
						cancel()
					}
				})
			}
			for _, l := range leases {
				work <- l
			}
			close(work)
			wg.Wait()
			return lost
		}
		return hold, end, ql.Close, nil
	}
}

// rsHold holds redsync Mutexes, each extended every renewal period by a
// goroutine of its own, as a redsync user keeps a lock alive.
func rsHold(addrs []string) func(*impl.Trips, string) (holdFn, func(), error) {
	return func(t *impl.Trips, prefix string) (holdFn, func(), error) {
		rs := impl.NewRS(impl.CountedClients(addrs, t), RenewTTL)
		hold := func(ctx context.Context, i int, held, lost func(), stop <-chan struct{}) error {
			m := rs.NewMutex(fmt.Sprintf("%s:%d", prefix, i))
			if err := m.LockContext(ctx); err != nil {
				return err
			}
			held()
			unlock := func() error {
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				defer cancel()
				_, err := m.UnlockContext(uctx)
				return err
			}
			tick := time.NewTicker(RenewPeriod(RenewTTL))
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return unlock()
				case <-ctx.Done():
					return unlock()
				case <-tick.C:
				}
				if ok, err := m.ExtendContext(ctx); !ok || err != nil {
					if ctx.Err() != nil {
						return unlock()
					}
					// Counted as lost, not as an error; the unlock finds
					// nothing of ours, as the lock is gone.
					lost()
					_ = unlock()
					return nil
				}
			}
		}
		return hold, rs.Close, nil
	}
}

// renewWindow takes n leases with hold, one goroutine each, started one
// period/n apart so that their renewals fall due at different times, as
// for leases taken over time; once all are held it measures a window of
// the given length, then gives them all up.
//
// With end (nil: none), hold returns once its lease is held, with no
// goroutine left per lease: end, called once the window is over, gives
// the leases up and returns how many had been lost.
func renewWindow(ctx context.Context, n int, window, period time.Duration, trips *impl.Trips, probes []*redis.Client, hold holdFn, end func() int, allHeld func()) (renewCounts, error) {
	c := renewCounts{leases: n, period: period}
	var ready sync.WaitGroup
	ready.Add(n)
	var held, lost atomic.Int32
	var mu sync.Mutex
	stop := make(chan struct{})
	s0, err := nodestats.ReadAll(ctx, probes)
	if err != nil {
		return c, err
	}
	mem0 := liveBytes()
	t0, start := trips.Snapshot(), time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var once sync.Once
			signal := func() { once.Do(ready.Done) }
			defer signal() // also when taking it failed
			tm := time.NewTimer(time.Duration(i) * period / time.Duration(n))
			select {
			case <-tm.C:
			case <-ctx.Done():
				tm.Stop()
				return
			}
			err := hold(ctx, i, func() { held.Add(1); signal() }, func() { lost.Add(1) }, stop)
			if err != nil && ctx.Err() == nil {
				mu.Lock()
				c.errs++
				if c.first == nil {
					c.first = err
				}
				mu.Unlock()
			}
		})
	}
	allReady := make(chan struct{})
	go func() { ready.Wait(); close(allReady) }()
	select {
	case <-allReady:
	case <-ctx.Done():
	}

	var endLost int
	finish := func() {
		close(stop)
		wg.Wait()
		<-allReady
		if end != nil {
			endLost = end()
		}
	}
	if ctx.Err() != nil {
		finish()
		return c, ctx.Err()
	}
	s1, err := nodestats.ReadAll(ctx, probes)
	if err != nil {
		finish()
		return c, err
	}
	c.clientBytes = liveBytes() - mem0
	g1 := runtime.NumGoroutine()
	if allHeld != nil {
		allHeld()
	}
	for i := range s1 {
		c.nodeBytes += s1[i].Memory - s0[i].Memory
	}
	t1, w0 := trips.Snapshot(), time.Now()
	cpu0, ok0 := processCPU()
	c.lockPhaseTime = w0.Sub(start)
	c.held = int(held.Load())
	trips.Record(true)
	tm := time.NewTimer(window)
	select {
	case <-tm.C:
	case <-ctx.Done():
		tm.Stop()
	}
	trips.Record(false)
	cpu1, ok1 := processCPU()
	t2, w1 := trips.Snapshot(), time.Now()
	s2, err := nodestats.ReadAll(context.WithoutCancel(ctx), probes)
	finish()
	if err != nil {
		return c, err
	}
	// The goroutines the held leases had: those that ended with them.
	// (Counting from before the first was taken would also count those of
	// an earlier run still winding down, and a Client's own few.)
	c.goroutines = int64(g1 - runtime.NumGoroutine())
	c.lost = int(lost.Load()) + endLost
	t3 := trips.Snapshot()
	s3, err := nodestats.ReadAll(context.WithoutCancel(ctx), probes)
	if err != nil {
		return c, err
	}
	c.lockPhaseNode = total(nodestats.SubAll(s1, s0))
	c.releasePhaseNode = total(nodestats.SubAll(s3, s2))
	c.window = w1.Sub(w0)
	c.sent = impl.Sub(t2, t1)
	c.node = nodestats.SubAll(s2, s1)
	c.clientCPU, c.cpuOK = cpu1-cpu0, ok0 && ok1
	c.lockPhase = impl.Total(impl.Sub(t1, t0))
	c.releasePhase = impl.Total(impl.Sub(t3, t2))
	c.lat = trips.Latencies()
	return c, ctx.Err()
}

// liveBytes is this process's live heap and goroutine stacks, after a
// full collection.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// openProbes opens one client per node for INFO readings, apart from the
// clients under test so that the readings are not counted as their
// traffic.
func openProbes(addrs []string) ([]*redis.Client, func()) {
	probes := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		probes[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	return probes, func() {
		for _, p := range probes {
			_ = p.Close()
		}
	}
}

func total(ss []nodestats.Stats) int64 {
	var n int64
	for _, s := range ss {
		n += s.Total()
	}
	return n
}

// RenewStats are the renew scenarios' figures for one run (JSON "renew").
type RenewStats struct {
	Leases   int     `json:"leases"`
	Held     int     `json:"held"` // leases held when the window began
	Lost     int     `json:"lost"` // leases whose holder learned they were lost before the end
	WindowS  float64 `json:"window_s"`
	PeriodMs float64 `json:"renew_period_ms"` // RenewPeriod(ttl)
	// Sent by the client, in the window: commands (a pipeline counts each),
	// per second, all nodes and per node.
	SentCmdsPerSec     float64   `json:"sent_cmds_per_sec"`
	SentCmdsPerSecNode []float64 `json:"sent_cmds_per_sec_node"`
	// Executed by the nodes, in the window, commands run inside scripts
	// included (INFO commandstats), per second; and per command name,
	// summed over the nodes.
	NodeCmdsPerSec     float64          `json:"node_cmds_per_sec"`
	NodeCmdsPerSecNode []float64        `json:"node_cmds_per_sec_node"`
	NodeCmds           map[string]int64 `json:"node_cmds"`
	// Round trips (a lone command or a pipeline) per node per renewal
	// period, and the largest of them.
	TripsPerPeriodNode []float64 `json:"round_trips_per_period_node"`
	TripsPerPeriodMax  float64   `json:"round_trips_per_period_max"`
	// Commands sent per lease per period, averaged over the nodes: 1 when
	// every lease is renewed with one command per node per period.
	CmdsPerLeasePeriod float64 `json:"cmds_per_lease_period"`
	// Commands the nodes executed (inside scripts included) per held lease
	// per renewal period, all five nodes together.
	NodeCmdsPerLeasePeriod float64 `json:"node_cmds_per_lease_period"`
	// CPU seconds per second of the window: this process (nil when it
	// cannot be measured here), and the five nodes together.
	ClientCPU *float64 `json:"client_cpu_s_per_s,omitempty"`
	NodesCPU  float64  `json:"nodes_cpu_s_per_s"`
	// Outside the window: commands sent, and executed by the nodes, while
	// the leases were being taken (and that phase's length) and while they
	// were given up.
	LockPhaseCmds        int64   `json:"lock_phase_sent_cmds"`
	LockPhaseNodeCmds    int64   `json:"lock_phase_node_cmds"`
	LockPhaseS           float64 `json:"lock_phase_s"`
	ReleasePhaseCmds     int64   `json:"release_phase_sent_cmds"`
	ReleasePhaseNodeCmds int64   `json:"release_phase_node_cmds"`
	// What one held lease costs, from before the first was taken to when
	// all were held, divided by the leases held: the client's live heap
	// and goroutine stacks (after a GC; the goroutine that runs fn and
	// holds the lease is counted, as a caller of Do has it anyway), its
	// goroutines beyond that one, and the nodes' used_memory (all five).
	ClientBytesPerLease float64 `json:"client_bytes_per_lease"`
	GoroutinesPerLease  float64 `json:"goroutines_per_lease_beyond_fn"`
	NodeBytesPerLease   float64 `json:"node_bytes_per_lease"`
}

// RenewFigures turns one run's raw counts into rates.
func RenewFigures(c renewCounts) RenewStats {
	r := RenewStats{Leases: c.leases, Held: c.held, Lost: c.lost, WindowS: c.window.Seconds(),
		PeriodMs: float64(c.period) / float64(time.Millisecond), NodeCmds: map[string]int64{},
		LockPhaseCmds: c.lockPhase.Cmds, LockPhaseNodeCmds: c.lockPhaseNode, LockPhaseS: c.lockPhaseTime.Seconds(),
		ReleasePhaseCmds: c.releasePhase.Cmds, ReleasePhaseNodeCmds: c.releasePhaseNode}
	if c.held > 0 {
		h := float64(c.held)
		r.ClientBytesPerLease = float64(c.clientBytes) / h
		r.GoroutinesPerLease = float64(c.goroutines)/h - 1
		r.NodeBytesPerLease = float64(c.nodeBytes) / h
	}
	secs := c.window.Seconds()
	if secs <= 0 || c.period <= 0 {
		return r
	}
	periods := float64(c.window) / float64(c.period)
	var cmds int64
	for _, s := range c.sent {
		cmds += s.Cmds
		r.SentCmdsPerSecNode = append(r.SentCmdsPerSecNode, float64(s.Cmds)/secs)
		tp := float64(s.Trips) / periods
		r.TripsPerPeriodNode = append(r.TripsPerPeriodNode, tp)
		r.TripsPerPeriodMax = max(r.TripsPerPeriodMax, tp)
	}
	r.SentCmdsPerSec = float64(cmds) / secs
	if len(c.sent) > 0 && c.held > 0 {
		r.CmdsPerLeasePeriod = float64(cmds) / float64(len(c.sent)) / float64(c.held) / periods
	}
	var ncmds int64
	var cpu float64
	for _, s := range c.node {
		t := s.Total()
		ncmds += t
		r.NodeCmdsPerSecNode = append(r.NodeCmdsPerSecNode, float64(t)/secs)
		cpu += s.CPU
		for k, v := range s.Commands() {
			r.NodeCmds[k] += v
		}
	}
	r.NodeCmdsPerSec = float64(ncmds) / secs
	if c.held > 0 {
		r.NodeCmdsPerLeasePeriod = float64(ncmds) / float64(c.held) / periods
	}
	r.NodesCPU = cpu / secs
	if c.cpuOK {
		r.ClientCPU = ptr(c.clientCPU.Seconds() / secs)
	}
	return r
}
