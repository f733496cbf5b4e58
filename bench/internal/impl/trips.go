package impl

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Trips counts, per node, what a set of clients sends: round trips (a
// command sent on its own, or one pipeline however long) and commands (a
// pipeline counts each of its commands). A script run that falls back from
// EVALSHA to EVAL counts two of each, as it costs two. While recording is
// on, it also keeps every round trip's latency. Safe for concurrent use.
type Trips struct {
	nodes []nodeTrips
	rec   atomic.Bool
	mu    sync.Mutex
	lat   []time.Duration
}

type nodeTrips struct {
	trips, cmds atomic.Int64
}

// TripCount is one node's totals so far.
type TripCount struct {
	Trips, Cmds int64
}

// NewTrips counts for n nodes.
func NewTrips(n int) *Trips { return &Trips{nodes: make([]nodeTrips, n)} }

// Snapshot returns each node's totals so far.
func (t *Trips) Snapshot() []TripCount {
	out := make([]TripCount, len(t.nodes))
	for i := range t.nodes {
		out[i] = TripCount{Trips: t.nodes[i].trips.Load(), Cmds: t.nodes[i].cmds.Load()}
	}
	return out
}

// Record turns latency recording on or off; Latencies returns what was
// recorded and clears it.
func (t *Trips) Record(on bool) { t.rec.Store(on) }

// Latencies returns the round-trip latencies recorded so far and forgets them.
func (t *Trips) Latencies() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.lat
	t.lat = nil
	return l
}

// Sub returns b - a per node.
func Sub(b, a []TripCount) []TripCount {
	out := make([]TripCount, len(b))
	for i := range b {
		out[i] = TripCount{Trips: b[i].Trips - a[i].Trips, Cmds: b[i].Cmds - a[i].Cmds}
	}
	return out
}

// Total sums the nodes' counts.
func Total(cs []TripCount) TripCount {
	var s TripCount
	for _, c := range cs {
		s.Trips += c.Trips
		s.Cmds += c.Cmds
	}
	return s
}

// Hook returns the go-redis hook that counts for node i.
func (t *Trips) Hook(i int) redis.Hook { return tripHook{t: t, n: &t.nodes[i]} }

func (t *Trips) observe(t0 time.Time) {
	d := time.Since(t0)
	t.mu.Lock()
	t.lat = append(t.lat, d)
	t.mu.Unlock()
}

type tripHook struct {
	t *Trips
	n *nodeTrips
}

func (tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.trips.Add(1)
		h.n.cmds.Add(1)
		if !h.t.rec.Load() {
			return next(ctx, cmd)
		}
		t0 := time.Now()
		err := next(ctx, cmd)
		h.t.observe(t0)
		return err
	}
}

func (h tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.trips.Add(1)
		h.n.cmds.Add(int64(len(cmds)))
		if !h.t.rec.Load() {
			return next(ctx, cmds)
		}
		t0 := time.Now()
		err := next(ctx, cmds)
		h.t.observe(t0)
		return err
	}
}

// CountedClients is Clients with t counting what each client sends (t must
// have been made for len(addrs) nodes).
func CountedClients(addrs []string, t *Trips) []*redis.Client {
	cs := Clients(addrs)
	for i, c := range cs {
		c.AddHook(t.Hook(i))
	}
	return cs
}
