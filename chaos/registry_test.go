package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRegisteredFaults checks every registered fault as a whole: it says
// what it does, applies somewhere real, and some profile runs it, only
// where it applies.
func TestRegisteredFaults(t *testing.T) {
	if len(faults.ordered) == 0 || len(faults.ordered) != len(faults.byName) {
		t.Fatalf("%d faults in order, %d by name", len(faults.ordered), len(faults.byName))
	}
	inProfile := map[string]bool{}
	for _, p := range Profiles {
		prof, err := LookupProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range prof.Runs {
			inProfile[s.Fault] = true
		}
	}
	for i, f := range faults.ordered {
		if faults.byName[f.name] != f {
			t.Errorf("fault %q: the name index points elsewhere", f.name)
		}
		if strings.TrimSpace(f.doc) == "" {
			t.Errorf("fault %q has no doc", f.name)
		}
		if i > 0 && faults.ordered[i-1].rank >= f.rank {
			t.Errorf("faults %q (rank %d) and %q (rank %d) are out of order", faults.ordered[i-1].name, faults.ordered[i-1].rank, f.name, f.rank)
		}
		if len(f.topologies) == 0 {
			t.Errorf("fault %q applies to no topology", f.name)
		}
		for _, tp := range f.topologies {
			if lookupTopology(tp) == nil {
				t.Errorf("fault %q applies to unknown topology %q", f.name, tp)
			}
		}
		if !inProfile[f.name] {
			t.Errorf("fault %q is in no profile", f.name)
		}
		for p, runs := range f.runs {
			for _, s := range runs {
				if s.Fault != f.name {
					t.Errorf("fault %q: a %s run names fault %q", f.name, p, s.Fault)
				}
				if _, _, err := resolve(s); err != nil {
					t.Errorf("fault %q: %s run %s: %v", f.name, p, s.Name(), err)
				}
			}
		}
	}
}

// TestAPIFaultNames: the fault names users and scripts rely on stay
// registered, where the docs say they apply.
func TestAPIFaultNames(t *testing.T) {
	for _, name := range []string{"none", "kill-1", "kill-2", "kill-3", "pause-primary-2", "partition-2", "slow-1",
		"restart-empty", "restart-empty-no-quarantine", "restart-delayed", "restart-aof", "failover", "worker-freeze",
		"clock-jump", "mixed", "worker-crash"} {
		if lookupFault(name) == nil {
			t.Errorf("fault %q is not registered", name)
		}
	}
	if f := lookupFault("failover"); f != nil && !slices.Equal(f.topologies, []string{SingleReplica}) {
		t.Errorf("failover applies to %v, want single+replica only", f.topologies)
	}
	if !slices.IsSorted(FaultNames()) || len(FaultNames()) != len(faults.ordered) {
		t.Errorf("FaultNames() = %v", FaultNames())
	}
}

// TestProfiles: every profile has runs, in rank order, each with a name
// of its own (a run's seed and database come from its name).
func TestProfiles(t *testing.T) {
	for _, p := range Profiles {
		prof, err := LookupProfile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(prof.Runs) == 0 {
			t.Errorf("profile %s has no runs", p)
		}
		seen := map[string]bool{}
		last := 0
		for _, s := range prof.Runs {
			if seen[s.Name()] {
				t.Errorf("profile %s: run %s twice", p, s.Name())
			}
			seen[s.Name()] = true
			f := lookupFault(s.Fault)
			if f == nil {
				t.Errorf("profile %s: run %s names an unregistered fault", p, s.Name())
				continue
			}
			if f.rank < last {
				t.Errorf("profile %s: run %s comes after a fault of higher rank", p, s.Name())
			}
			last = f.rank
		}
	}
}

// TestRegistryRejects: a malformed entry is refused with a message that
// names the problem, and leaves the registry as it was.
func TestRegistryRejects(t *testing.T) {
	good := func() *fault {
		return &fault{name: "good", rank: 5, doc: "a fault", topologies: []string{Redlock5},
			runs: map[string][]Scenario{"quick": {newRun(Redlock5, "none", 2, 3, Expect{})}}}
	}
	for _, tc := range []struct {
		name  string
		spoil func(f *fault)
		msg   string
	}{
		{"no name", func(f *fault) { f.name = "" }, "want a non-empty name"},
		{"slash in name", func(f *fault) { f.name = "kill/2" }, "without spaces, commas or slashes"},
		{"comma in name", func(f *fault) { f.name = "kill,2" }, "without spaces, commas or slashes"},
		{"no doc", func(f *fault) { f.doc = "" }, "has no doc"},
		{"no rank", func(f *fault) { f.rank = 0 }, "want > 0"},
		{"no topology", func(f *fault) { f.topologies = nil }, "applies to no topology"},
		{"unknown topology", func(f *fault) { f.topologies = []string{"redlock-7"} }, `unknown topology "redlock-7"`},
		{"unknown profile", func(f *fault) { f.runs["quik"] = f.runs["quick"] }, `unknown profile "quik"`},
		{"run elsewhere", func(f *fault) { f.runs["quick"] = []Scenario{newRun(Single, "none", 2, 3, Expect{})} }, "a topology it does not apply to"},
		{"unknown fencing", func(f *fault) { f.runs["quick"][0].Fencing = "paper" }, `unknown fencing mode "paper"`},
		{"no workers", func(f *fault) { f.runs["quick"][0].Workers = 0 }, "0 workers"},
		{"no ttl", func(f *fault) { f.runs["quick"][0].TTL = 0 }, "TTL 0s"},
		{"ttl on advisory", func(f *fault) {
			f.topologies = []string{PgAdvisory}
			f.runs["quick"] = []Scenario{newRun(PgAdvisory, "none", 2, 3, Expect{})}
			f.runs["quick"][0].TTL = time.Second
		}, "TTL 1s"},
		{"token on advisory", func(f *fault) {
			f.topologies = []string{PgAdvisory}
			f.runs["quick"] = []Scenario{newRun(PgAdvisory, "claim-first", 2, 3, Expect{})}
		}, "a lock in the transaction has no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r registry
			f := good()
			tc.spoil(f)
			err := r.add(f)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("add: %v, want an error containing %q", err, tc.msg)
			}
			if len(r.ordered) != 0 || len(r.byName) != 0 {
				t.Errorf("a refused fault was added")
			}
		})
	}
	var r registry
	if err := r.add(good()); err != nil {
		t.Fatal(err)
	}
	dup := good()
	dup.rank = 6
	if err := r.add(dup); err == nil || !strings.Contains(err.Error(), "registered twice") {
		t.Errorf("same name twice: %v", err)
	}
	other := good()
	other.name = "other"
	if err := r.add(other); err == nil || !strings.Contains(err.Error(), "share rank 5") {
		t.Errorf("same rank twice: %v", err)
	}
	// Order follows rank, not the order of registration.
	first := good()
	first.name, first.rank = "first", 1
	if err := r.add(first); err != nil {
		t.Fatal(err)
	}
	if r.ordered[0].name != "first" || r.ordered[1].name != "good" {
		t.Errorf("order %s, %s; want first, good", r.ordered[0].name, r.ordered[1].name)
	}
	if s := r.byName["good"].runs["quick"][0]; s.Fault != "good" {
		t.Errorf("a registered run names fault %q, want good", s.Fault)
	}
}

// TestResolve: a run whose fault or topology is unknown, or whose fault
// does not apply to its topology, fails before anything starts.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		topo, fault, msg string
	}{
		{"redlock-7", "none", `unknown topology "redlock-7"`},
		{Redlock5, "kill-9", `unknown fault "kill-9"`},
		{Redlock5, "failover", "fault failover does not apply to topology redlock-5"},
		{Single, "restart-aof", "does not apply to topology single"},
	} {
		if _, _, err := resolve(Scenario{Topology: tc.topo, Fault: tc.fault}); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s/%s: %v, want an error containing %q", tc.topo, tc.fault, err, tc.msg)
		}
	}
	tp, f, err := resolve(Scenario{Topology: SingleReplica, Fault: "failover"})
	if err != nil || tp.name != SingleReplica || f.name != "failover" {
		t.Errorf("single+replica/failover: %v, %v, %v", tp, f, err)
	}
}

// TestQuarantine: the quarantine is on where peers can remember a node,
// unless the fault shows what happens without it.
func TestQuarantine(t *testing.T) {
	for _, tc := range []struct {
		topo, fault string
		want        bool
	}{
		{Redlock5, "restart-empty", true},
		{Redlock5, "mixed", true},
		{Redlock5, "restart-empty-no-quarantine", false},
		{Redlock5, "restart-delayed", false},
		{Redlock5, "restart-aof", false},
		{Single, "none", false},
		{SingleReplica, "failover", false},
		{"redlock-7", "none", false},
	} {
		if got := (Scenario{Topology: tc.topo, Fault: tc.fault}).Quarantine(); got != tc.want {
			t.Errorf("%s/%s: quarantine %v, want %v", tc.topo, tc.fault, got, tc.want)
		}
	}
	// A node restarted empty must stay out at least as long as a lease
	// granted before its restart can be valid.
	for _, ttl := range []time.Duration{10 * time.Millisecond, quickTTL, engTTL, time.Minute} {
		if q := quarantineFor(ttl); q <= ttl {
			t.Errorf("quarantineFor(%v) = %v, want more than the TTL", ttl, q)
		}
	}
}

// TestTopologies: names are unique and every topology can start.
func TestTopologies(t *testing.T) {
	seen := map[string]bool{}
	for _, tp := range topologies {
		// Only the locks in the section's transaction live on no server
		// of their own (they are on the suite's PostgreSQL) and have no
		// TTL.
		own := !tp.inTransaction()
		if seen[tp.name] || tp.doc == "" || (tp.lockNodes >= 1) != own || (tp.ttl > 0) != own || tp.start == nil ||
			tp.nodeTimeout == nil || (tp.warm != nil) != own || (tp.probe != nil) != own ||
			!slices.Contains([]string{lockRedlock, lockAdvisory, lockEtcd, lockRow, lockZK}, tp.lock) {
			t.Errorf("topology %+v: duplicate or incomplete", tp)
		}
		seen[tp.name] = true
	}
	if !slices.Equal(allTopologies, []string{Single, SingleReplica, Redlock5, PgAdvisory, Etcd3, PgRow, ZK3}) {
		t.Errorf("allTopologies = %v", allTopologies)
	}
	r5 := lookupTopology(Redlock5)
	for ttl, want := range map[time.Duration]time.Duration{quickTTL: 30 * time.Millisecond, engTTL: 180 * time.Millisecond} {
		if got := r5.nodeTimeout(ttl); got != want {
			t.Errorf("redlock-5 node timeout for TTL %v = %v, want %v", ttl, got, want)
		}
	}
	if got := lookupTopology(Single).nodeTimeout(engTTL); got != 100*time.Millisecond {
		t.Errorf("single node timeout = %v, want 100ms", got)
	}
}

// TestWorkerConfig: the fault's hook shapes each worker's configuration
// on top of the scenario's and the topology's settings.
func TestWorkerConfig(t *testing.T) {
	cfgs := func(topo, faultName string, workers int) []workerConfig {
		t.Helper()
		sc := Scenario{Topology: topo, Fault: faultName, Fencing: "none", Workers: workers, Sections: 4, TTL: quickTTL, Work: quickWork}
		tp, f, err := resolve(sc)
		if err != nil {
			t.Fatal(err)
		}
		c := fakeCluster(t, tp.lockNodes, workers)
		e := &env{sc: sc, seed: 9, topo: tp, fault: f, cluster: c}
		out := make([]workerConfig, workers)
		for w := range out {
			out[w] = newWorkerConfig(e, "dsn", w)
		}
		return out
	}
	k3 := cfgs(Redlock5, "kill-3", 2)
	for _, c := range k3 {
		if c.LockMs != 400 || c.MaxFail != 2 || len(c.Gates) != 0 || len(c.Dial) != 5 || c.NodeMs != 30 {
			t.Errorf("kill-3 worker %d: lock wait %d, max failures %d, gates %v, %d links, node timeout %d",
				c.ID, c.LockMs, c.MaxFail, c.Gates, len(c.Dial), c.NodeMs)
		}
	}
	fo := cfgs(SingleReplica, "failover", 2)
	if !slices.Equal(fo[0].Gates, []gatePoint{gateLocked, gateRead}) || !slices.Equal(fo[1].Gates, []gatePoint{gateStart, gateLocked}) ||
		fo[0].GateUntil != 1 || fo[1].GateUntil != 1 || len(fo[0].Dial) != 1 || !fo[0].NoQuar ||
		fo[0].NodeMs != 600 || fo[1].NodeMs != 600 {
		t.Errorf("failover: %+v", fo)
	}
	fa := cfgs(Redlock5, "freeze-acquire", 3)
	if !slices.Equal(fa[0].Gates, []gatePoint{gateStart}) || fa[1].Gates != nil || fa[1].GateUntil != 0 {
		t.Errorf("freeze-acquire: holder %v/%d, other %v/%d", fa[0].Gates, fa[0].GateUntil, fa[1].Gates, fa[1].GateUntil)
	}
	for _, c := range cfgs(Redlock5, "none", 2) {
		if c.LockMs != 10_000 || c.MaxFail != 0 || c.Gates != nil || c.NoQuar || c.Key != counterKey {
			t.Errorf("none worker %d: %+v", c.ID, c)
		}
	}
}

// fakeCluster is a cluster of n lock nodes that do not exist, with real
// proxies to them, for building worker configurations.
func fakeCluster(t *testing.T, n, workers int) *cluster {
	t.Helper()
	c := &cluster{lockN: n}
	for i := range n {
		c.nodes = append(c.nodes, fakeNode(fmt.Sprintf("127.0.0.1:%d", 1+i)))
	}
	c.prox = make([][]*proxy, workers)
	for w := range c.prox {
		for i := range n {
			p, err := newProxy(c.nodes[i].Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			c.prox[w] = append(c.prox[w], p)
		}
	}
	return c
}

type fakeNode string

func (n fakeNode) Addr() string                { return string(n) }
func (fakeNode) Kill() error                   { return nil }
func (fakeNode) Restart(context.Context) error { return nil }
func (fakeNode) Pause() error                  { return nil }
func (fakeNode) Resume() error                 { return nil }
func (fakeNode) JumpClock(time.Duration) error { return nil }
func (fakeNode) Stop() error                   { return nil }

// TestElecting: --election keeps the quick profile's runs on redlock
// topologies whose lock is not broken on purpose and whose fault lets the
// workers take the lock their own way, each worker a candidate, named so;
// it refuses a selection with none.
func TestElecting(t *testing.T) {
	quick, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := quick.Electing(false); err != nil || len(p.Runs) != len(quick.Runs) {
		t.Fatalf("Electing(false) changed the profile: %d of %d runs, %v", len(p.Runs), len(quick.Runs), err)
	}
	p, err := quick.Electing(true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range p.Runs {
		names = append(names, s.Name())
		f, tp := lookupFault(s.Fault), lookupTopology(s.Topology)
		switch {
		case s.Style != styleElection || !strings.HasSuffix(s.Name(), "/election"):
			t.Errorf("%s: style %q", s.Name(), s.Style)
		case tp.lock != lockRedlock:
			t.Errorf("%s: not a redlock topology", s.Name())
		case s.Expect.Overlaps == Positive:
			t.Errorf("%s: a run whose lock is broken on purpose", s.Name())
		case f.name == "renewal-hang":
			t.Errorf("%s: its workers run under Do", s.Name())
		}
	}
	for _, want := range []string{"redlock-5/kill-2/none/election", "redlock-5/restart-empty/none/election", "redlock-5/worker-freeze/claim-first/election"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s is not kept: %v", want, names)
		}
	}
	etcd, err := quick.Filter([]string{Etcd3}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Electing(true); err == nil || !strings.Contains(err.Error(), "redlock topologies") {
		t.Errorf("Electing on etcd runs: %v, want an error", err)
	}
}

// TestTransferring: --transfers keeps the quick profile's redlock runs
// that are not broken on purpose and expect grants, each worker moving
// money between accounts; the runs become fenced, except the unfenced
// control of a fault whose runs compare fencing modes, and every fenced
// run but write-only's must lose nothing. A selection with none is
// refused.
func TestTransferring(t *testing.T) {
	quick, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := quick.Transferring(false); err != nil || len(p.Runs) != len(quick.Runs) {
		t.Fatalf("Transferring(false) changed the profile: %d of %d runs, %v", len(p.Runs), len(quick.Runs), err)
	}
	p, err := quick.Transferring(true)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]Scenario{}
	for _, s := range p.Runs {
		names[s.Name()] = s
		switch {
		case s.Style != styleTransfers || !strings.HasSuffix(s.Name(), "/transfers"):
			t.Errorf("%s: style %q", s.Name(), s.Style)
		case lookupTopology(s.Topology).lock != lockRedlock:
			t.Errorf("%s: not a redlock topology", s.Name())
		case s.Expect.Overlaps == Positive || s.Expect.NoQuorum:
			t.Errorf("%s: a run that expects overlaps or no grant", s.Name())
		case (s.Fencing == "claim-first" || s.Fencing == "fence-table") && s.Expect.Lost != Zero:
			t.Errorf("%s: fenced, but lost updates %s", s.Name(), s.Expect.Lost)
		}
	}
	for _, want := range []string{
		"redlock-5/none/claim-first/transfers", "redlock-5/kill-1/claim-first/transfers",
		"redlock-5/pause-primary-2/claim-first/transfers", "redlock-5/partition-2/claim-first/transfers",
		"redlock-5/restart-empty/claim-first/transfers", "redlock-5/clock-jump/claim-first/transfers",
		"redlock-5/worker-freeze/none/transfers", "redlock-5/worker-freeze/fence-table/transfers",
	} {
		if _, ok := names[want]; !ok {
			t.Errorf("%s is not kept", want)
		}
	}
	for _, gone := range []string{"redlock-5/none/none/transfers", "redlock-5/kill-3/claim-first/transfers", "redlock-5/renewal-hang/claim-first/transfers"} {
		if _, ok := names[gone]; ok {
			t.Errorf("%s is kept", gone)
		}
	}
	if s := names["redlock-5/worker-freeze/none/transfers"]; s.Expect.Lost != Positive {
		t.Errorf("the unfenced control under worker-freeze expects lost updates %s, want >0", s.Expect.Lost)
	}
	if s := names["redlock-5/worker-freeze/claim-first/transfers"]; !s.Expect.Rejection {
		t.Error("worker-freeze under claim-first no longer expects a refused transfer")
	}
	etcd, err := quick.Filter([]string{Etcd3}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Transferring(true); err == nil || !strings.Contains(err.Error(), "redlock topologies") {
		t.Errorf("Transferring on etcd runs: %v, want an error", err)
	}
}
