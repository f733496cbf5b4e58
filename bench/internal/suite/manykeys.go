package suite

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
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

	cost cost // where the work went
}

// manyKeys runs 64 goroutines, each looping Lock+Release on its own key,
// through one instance of each implementation over one go-redis client per
// node shared by the goroutines: quorumlock (one Client), redsync (one
// Mutex per key) and the pipelined floor, interleaved in blocks. Every
// implementation's clients count the commands and round trips they send.
func manyKeys(ctx context.Context, cfg Config, _ []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
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
		{l: fl, variant: "SET NX PX + CAD script, pipelined per node", trips: tf, cost: cost{probes: probes}},
		{l: rs, variant: "one Mutex per key", trips: tr, cost: cost{probes: probes}},
		{l: ql, variant: "one Client, 64 keys", trips: tq, cost: cost{probes: probes}},
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
	if measure {
		e.cost.begin(ctx)
	}
	a0, s0 := allocs(), e.trips.Snapshot()
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
	e.allocs += allocs() - a0 // before the INFO readings allocate
	e.cost.end(ctx)
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
	e.cost.fill(&r, len(e.lat))
	return r
}
