package impl

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func addrs(nodes []*testenv.RedisNode) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr()
	}
	return out
}

func TestTripsCountsRoundTripsAndCommands(t *testing.T) {
	ns := testenv.RedisNodes(t, 2)
	tr := NewTrips(2)
	cs := CountedClients(addrs(ns), tr)
	t.Cleanup(func() { closeAll(cs) })
	ctx := context.Background()
	// Opening a connection sends its handshake through the hooks too;
	// count from after that (go-redis keeps a separate pool for pipelines).
	for _, c := range cs {
		if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil }); err != nil {
			t.Fatal(err)
		}
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}
	s0 := tr.Snapshot()
	_ = tr.Latencies()

	if err := cs[0].Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	tr.Record(true)
	if _, err := cs[1].Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Ping(ctx)
		p.Ping(ctx)
		p.Ping(ctx)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tr.Record(false)
	// A script the node has not seen yet: EVALSHA fails, then EVAL runs it.
	s := redis.NewScript("return 7 + " + time.Now().Format("150405"))
	if err := s.Run(ctx, cs[0], nil).Err(); err != nil {
		t.Fatal(err)
	}

	got := Sub(tr.Snapshot(), s0)
	want := []TripCount{{Trips: 3, Cmds: 3}, {Trips: 1, Cmds: 3}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("node %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if tot := Total(got); tot != (TripCount{Trips: 4, Cmds: 6}) {
		t.Errorf("Total = %+v", tot)
	}
	if d := Sub(got, want); Total(d) != (TripCount{}) {
		t.Errorf("Sub of equal counts = %+v", d)
	}
	if l := tr.Latencies(); len(l) != 1 {
		t.Errorf("recorded %d latencies, want 1 (the pipeline only)", len(l))
	}
	if l := tr.Latencies(); len(l) != 0 {
		t.Errorf("Latencies did not forget: %d left", len(l))
	}
}

// TestPipeFloorSendsTwoCommandsPerNode checks the floor against what the
// docs say it does: per Lock+Release one SET NX PX and one script call on
// each of the five nodes, batched into pipelines, and nothing left behind.
func TestPipeFloorSendsTwoCommandsPerNode(t *testing.T) {
	ns := testenv.RedisNodes(t, 5)
	ctx := context.Background()
	tr := NewTrips(5)
	f, err := NewPipeFloor(ctx, CountedClients(addrs(ns), tr), 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	probes := make([]*redis.Client, len(ns))
	for i, n := range ns {
		probes[i] = n.Client(t)
	}
	key := testenv.Key(t)

	// The first operation opens the connections (their handshakes go
	// through the hooks too); count from after it.
	if _, err := Op(ctx, f, key+":warm"); err != nil {
		t.Fatal(err)
	}
	before, err := nodestats.ReadAll(ctx, probes)
	if err != nil {
		t.Fatal(err)
	}
	s0 := tr.Snapshot()
	const goroutines, each = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		k := key + ":" + string(rune('a'+g))
		wg.Go(func() {
			for range each {
				if _, err := Op(ctx, f, k); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	after, err := nodestats.ReadAll(ctx, probes)
	if err != nil {
		t.Fatal(err)
	}
	const ops = goroutines * each
	d := Sub(tr.Snapshot(), s0)
	for i, n := range d {
		if n.Cmds != 2*ops {
			t.Errorf("node %d: %d commands sent, want %d", i, n.Cmds, 2*ops)
		}
		if n.Trips > n.Cmds {
			t.Errorf("node %d: %d round trips for %d commands", i, n.Trips, n.Cmds)
		}
	}
	if tot := Total(d); tot.Trips == tot.Cmds {
		t.Errorf("no two commands shared a round trip with %d goroutines (%+v)", goroutines, tot)
	}
	for i, s := range nodestats.SubAll(after, before) {
		if s.Calls["set"] != ops || s.Calls["evalsha"] != ops || s.Calls["del"] != ops {
			t.Errorf("node %d executed %v, want %d each of set, evalsha and del", i, s.Calls, ops)
		}
	}
	for i, p := range probes {
		if n, err := p.Exists(ctx, key+":a").Result(); err != nil || n != 0 {
			t.Errorf("node %d: key left behind (exists %d, %v)", i, n, err)
		}
	}

	// A key someone else holds on one node is not a floor operation.
	if err := probes[2].Set(ctx, key+":held", "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Lock(ctx, key+":held"); !errors.Is(err, ErrHeld) {
		t.Errorf("Lock of a key held on node 2: %v, want ErrHeld", err)
	}
}
