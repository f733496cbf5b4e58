package suite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/bench/internal/nodes"
	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
)

// ManyKeysGoroutines is the number of goroutines in the many-keys
// scenario, each looping Lock+Release on a key of its own.
const ManyKeysGoroutines = 64

// mkEntry is one implementation's part in the many-keys scenario.
type mkEntry struct {
	l       impl.Locker
	variant string
	trips   *impl.Trips // counts what its clients send
	lat     []time.Duration
	wall    time.Duration
	allocs  uint64
	sent    impl.TripCount
	errs    int
	first   error

	// Where the work went, summed over the measured blocks: commands the
	// nodes executed (inside scripts included), the nodes' CPU time and
	// this process's. The blocks run one implementation at a time, so the
	// process's CPU in a block is that implementation's (plus the
	// runtime's own upkeep, the same for all).
	nodeCmds  int64
	nodesCPU  float64 // seconds
	clientCPU time.Duration
	cpuOK     bool // clientCPU could be read in every block
	statsErr  error
	probes    []*redis.Client
}

// manyKeys runs 64 goroutines, each looping Lock+Release on its own key,
// through one instance of each implementation over one go-redis client per
// node shared by the goroutines: quorumlock (one Client), redsync (one
// Mutex per key) and the pipelined floor, interleaved in blocks. Every
// implementation's clients count the commands and round trips they send.
func manyKeys(ctx context.Context, cfg Config, _ *nodes.Set, addrs []string, key string) ([]Result, error) {
	tq, tr, tf := impl.NewTrips(len(addrs)), impl.NewTrips(len(addrs)), impl.NewTrips(len(addrs))
	ql, err := impl.NewQL(impl.CountedClients(addrs, tq), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer ql.Close()
	rs := impl.NewRS(impl.CountedClients(addrs, tr), cfg.TTL)
	defer rs.Close()
	fl, err := impl.NewPipeFloor(ctx, impl.CountedClients(addrs, tf), cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	probes, closeProbes := openProbes(addrs)
	defer closeProbes()

	es := []*mkEntry{
		{l: fl, variant: "SET NX PX + CAD script, pipelined per node", trips: tf, probes: probes, cpuOK: true},
		{l: rs, variant: "one Mutex per key", trips: tr, probes: probes, cpuOK: true},
		{l: ql, variant: "one Client, 64 keys", trips: tq, probes: probes, cpuOK: true},
	}
	for _, e := range es {
		e.block(ctx, fmt.Sprintf("%s:%s", key, e.l.Name()), pick(cfg, 200*time.Millisecond, 500*time.Millisecond), false)
	}
	blocks, dur := pick(cfg, 2, 4), pick(cfg, time.Second, 2*time.Second)
	for b := range blocks {
		for k := range es {
			if ctx.Err() != nil {
				break
			}
			e := es[(b+k)%len(es)]
			e.block(ctx, fmt.Sprintf("%s:%s", key, e.l.Name()), dur, true)
		}
	}
	var out []Result
	for _, e := range es {
		out = append(out, e.result())
	}
	return out, ctx.Err()
}

// block runs the goroutines for dur, each on key prefix:g; every operation
// started before dur is up runs to its end, and the block's wall time
// includes them. With measure unset it only warms up.
func (e *mkEntry) block(ctx context.Context, prefix string, dur time.Duration, measure bool) {
	lats := make([][]time.Duration, ManyKeysGoroutines)
	var mu sync.Mutex
	var errs int
	var first error
	var wg sync.WaitGroup
	var n0 []nodestats.Stats
	var nerr error
	if measure {
		n0, nerr = nodestats.ReadAll(ctx, e.probes)
	}
	a0, s0 := allocs(), e.trips.Snapshot()
	c0, ok0 := processCPU()
	start := time.Now()
	end := start.Add(dur)
	for g := range ManyKeysGoroutines {
		k := fmt.Sprintf("%s:%d", prefix, g)
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				d, err := impl.Op(ctx, e.l, k)
				if err != nil {
					mu.Lock()
					errs++
					if first == nil {
						first = err
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // no busy loop on a persistent failure
					continue
				}
				lats[g] = append(lats[g], d)
			}
		})
	}
	wg.Wait()
	if !measure {
		return
	}
	e.wall += time.Since(start)
	c1, ok1 := processCPU()
	e.allocs += allocs() - a0
	e.clientCPU += c1 - c0
	e.cpuOK = e.cpuOK && ok0 && ok1
	if nerr == nil {
		var n1 []nodestats.Stats
		if n1, nerr = nodestats.ReadAll(context.WithoutCancel(ctx), e.probes); nerr == nil {
			for _, d := range nodestats.SubAll(n1, n0) {
				e.nodeCmds += d.Total()
				e.nodesCPU += d.CPU
			}
		}
	}
	if nerr != nil && e.statsErr == nil {
		e.statsErr = nerr
	}
	d := impl.Total(impl.Sub(e.trips.Snapshot(), s0))
	e.sent.Trips += d.Trips
	e.sent.Cmds += d.Cmds
	for _, l := range lats {
		e.lat = append(e.lat, l...)
	}
	e.errs += errs
	if e.first == nil {
		e.first = first
	}
}

func (e *mkEntry) result() Result {
	r := Result{Scenario: ManyKeys, Impl: e.l.Name(), Variant: e.variant, Samples: len(e.lat), Errors: e.errs}
	if e.first != nil {
		r.FirstError = e.first.Error()
	}
	if len(e.lat) == 0 {
		return r
	}
	n := float64(len(e.lat))
	r.P50us = us(pct(e.lat, 0.50))
	r.P99us = us(pct(e.lat, 0.99))
	r.MaxUs = us(e.lat[len(e.lat)-1])
	r.OpsPerSec = n / e.wall.Seconds()
	r.AllocsPerOp = ptr(float64(e.allocs) / n)
	r.CallsPerOp = ptr(float64(e.sent.Cmds) / n)
	r.TripsPerOp = ptr(float64(e.sent.Trips) / n)
	if e.statsErr == nil {
		r.NodeCmdsPerOp = ptr(float64(e.nodeCmds) / n)
		r.NodesCPUusPerOp = ptr(e.nodesCPU * 1e6 / n)
	} else if r.FirstError == "" {
		r.FirstError = "reading the nodes' INFO: " + e.statsErr.Error()
	}
	if e.cpuOK {
		r.ClientCPUusPerOp = ptr(float64(e.clientCPU.Microseconds()) / n)
	}
	return r
}
