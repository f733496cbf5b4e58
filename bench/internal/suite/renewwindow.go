package suite

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
)

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
	// fnBytes and fnGoroutines are what the same n goroutines cost when
	// each only waits, holding nothing (idleCost; 0 where hold keeps no
	// goroutine per lease): the part a caller of Do has anyway.
	fnBytes, fnGoroutines int64
	errs                  int
	first                 error
	// Why the lost leases ended, by when their holder learned it: while
	// the leases were being taken, in the window, or once it was over
	// (giving them up: a release that found the key gone); and how long
	// giving them all up took.
	lostWhy          map[lossKey]int
	releasePhaseTime time.Duration
	// ranOutAfterFn counts the Do leases whose validity ran out after fn
	// returned, before the release went out: not lost (Do's Warn).
	ranOutAfterFn int
	// The leases' keys the nodes still held once the release phase was
	// over (releaseEnd), a key counted once per node, and how long after
	// that end none was left (keysGone, -1 when not within the bound
	// keysFreed was given).
	keysLeft   int64
	releaseEnd time.Time
	keysGone   time.Duration
}

// lossKey is one reason a lease was lost, and the phase of the run in
// which its holder learned it.
type lossKey struct{ phase, reason string }

// The phases of a renew run, as lossKey names them.
const (
	phaseTaking  = "taking"
	phaseWindow  = "window"
	phaseRelease = "release"
)

// renewWindow takes n leases with hold, one goroutine each, started one
// period/n apart so that their renewals fall due at different times, as
// for leases taken over time; once all are held it measures a window of
// the given length, then gives them all up.
//
// With end (nil: none), hold returns once its lease is held, with no
// goroutine left per lease: end, called once the window is over, gives
// the leases up and returns why each that had been lost ended.
func renewWindow(ctx context.Context, n int, window, period time.Duration, trips *impl.Trips, probes []*redis.Client, hold holdFn, end func() []string, allHeld func()) (renewCounts, error) {
	c := renewCounts{leases: n, period: period, lostWhy: map[lossKey]int{}}
	var ready sync.WaitGroup
	ready.Add(n)
	var held atomic.Int32
	var mu sync.Mutex
	var phase atomic.Value
	phase.Store(phaseTaking)
	lost := func(why string) {
		mu.Lock()
		c.lostWhy[lossKey{phase.Load().(string), why}]++
		mu.Unlock()
	}
	stop := make(chan struct{})
	s0, err := nodestats.ReadAll(ctx, probes)
	if err != nil {
		return c, err
	}
	g0 := settledGoroutines()
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
			err := hold(ctx, i, func() { held.Add(1); signal() }, lost, stop)
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

	finish := func() {
		phase.Store(phaseRelease)
		r0 := time.Now()
		close(stop)
		wg.Wait()
		<-allReady
		if end != nil {
			// Leases kept with no goroutine of their own are seen to have
			// ended only now, each in the window or before it.
			for _, why := range end() {
				c.lostWhy[lossKey{phaseWindow, why}]++
			}
		}
		c.releaseEnd = time.Now()
		c.releasePhaseTime = c.releaseEnd.Sub(r0)
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
	phase.Store(phaseWindow)
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
	// The goroutines the held leases had: those there were once all were
	// held, less those from before the first was taken (counted once an
	// earlier run's had wound down). Counting those that ended with the
	// leases instead read less than none: a release's calls to the
	// slower nodes still run after Do returns.
	c.goroutines = int64(g1 - g0)
	for _, k := range c.lostWhy {
		c.lost += k
	}
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

// idleCost is what n goroutines started as renewWindow starts them cost
// when each, in place of taking a lease, says it is held and waits for
// the end: the goroutine that runs fn, with the bench's own wrapping,
// measured the same way (bytes after a GC, goroutines) in the same
// process. renewWindow's figures less these are what holding the leases
// added beyond that goroutine.
func idleCost(ctx context.Context, n int, period time.Duration, probes []*redis.Client) (bytes, goroutines int64, err error) {
	idle := func(_ context.Context, _ int, held func(), _ func(string), stop <-chan struct{}) error {
		held()
		<-stop
		return nil
	}
	c, err := renewWindow(ctx, n, time.Millisecond, period, impl.NewTrips(len(probes)), probes, idle, nil, nil)
	return c.clientBytes, c.goroutines, err
}

// settledGoroutines is the number of goroutines once it has stopped
// falling (an earlier run's winding down), waiting at most 2 s.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 40 {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			return m
		}
		n = m
	}
	return n
}

// liveBytes is this process's live heap and goroutine stacks, after a
// full collection.
func liveBytes() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

func total(ss []nodestats.Stats) int64 {
	var n int64
	for _, s := range ss {
		n += s.Total()
	}
	return n
}

// leaseKeys counts the keys of leases 0 to n-1 (prefix:i) that the nodes
// hold, a key counted once per node: one EXISTS per 1,000 keys, in one
// pipeline per node.
func leaseKeys(ctx context.Context, probes []*redis.Client, names []string) (int64, error) {
	var n int64
	for _, p := range probes {
		pipe := p.Pipeline()
		cmds := make([]*redis.IntCmd, 0, len(names)/1000+1)
		for lo := 0; lo < len(names); lo += 1000 {
			cmds = append(cmds, pipe.Exists(ctx, names[lo:min(len(names), lo+1000)]...))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return 0, err
		}
		for _, c := range cmds {
			n += c.Val()
		}
	}
	return n, nil
}

// keysFreed counts the keys of the run's n leases (prefix:i) left on the
// nodes now, just after the release phase, into c.keysLeft, then reads
// them every 250 ms until none is left or bound has passed since the
// phase ended, and records how long after that end it took (-1: not
// within bound). A release still on its way when the last holder has
// returned lands in this time; one that was never sent leaves its key to
// its ttl.
func keysFreed(ctx context.Context, c *renewCounts, probes []*redis.Client, prefix string, n int, bound time.Duration) error {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s:%d", prefix, i)
	}
	c.keysGone = -1
	for first := true; ; first = false {
		left, err := leaseKeys(ctx, probes, names)
		if err != nil {
			return err
		}
		since := time.Since(c.releaseEnd)
		if first {
			c.keysLeft = left
		}
		if left == 0 {
			c.keysGone = since
			return nil
		}
		if since >= bound {
			return nil
		}
		tm := time.NewTimer(250 * time.Millisecond)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
}
