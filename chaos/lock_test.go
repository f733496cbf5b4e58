package chaos

import (
	"slices"
	"testing"
)

// TestAdvisoryKey pins the documented key mapping (64-bit FNV-1a, read as
// a signed integer) to values computed outside Go's hash/fnv, so that a
// change to it, which would let old and new processes hold the "same"
// lock at once, cannot pass unnoticed.
func TestAdvisoryKey(t *testing.T) {
	for key, want := range map[string]int64{
		"":              -3750763034362895579, // the offset basis 0xcbf29ce484222325
		"a":             -5808556873153909620,
		"chaos:counter": 6400458422677405233,
	} {
		if got := advisoryKey(key); got != want {
			t.Errorf("advisoryKey(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestWorkerLockKinds: each topology's workers get its kind of lock, the
// endpoints they need, and only the Redis ones get proxies.
func TestWorkerLockKinds(t *testing.T) {
	for _, tc := range []struct {
		topo, lock string
		nodes      int
		proxied    bool
	}{
		{Redlock5, lockRedlock, 5, true},
		{Etcd3, lockEtcd, 3, false},
		{PgAdvisory, lockAdvisory, 0, false},
		{PgRow, lockRow, 0, false},
		{ZK3, lockZK, 3, false},
	} {
		tp := lookupTopology(tc.topo)
		sc := Scenario{Topology: tc.topo, Fault: "worker-crash", Fencing: "none", Workers: 2, Sections: 4, TTL: tp.ttl, Work: quickWork}
		_, f, err := resolve(sc)
		if err != nil {
			t.Fatal(err)
		}
		c := fakeCluster(t, tp.lockNodes, 2)
		if !tc.proxied {
			c.prox = nil
		}
		cfg := newWorkerConfig(&env{sc: sc, seed: 1, topo: tp, fault: f, cluster: c}, "dsn", 1)
		if cfg.Lock != tc.lock || len(cfg.Nodes) != tc.nodes || (len(cfg.Dial) > 0) != tc.proxied {
			t.Errorf("%s: lock %q, %d nodes, dial %v; want %q, %d, proxied %v", tc.topo, cfg.Lock, len(cfg.Nodes), cfg.Dial, tc.lock, tc.nodes, tc.proxied)
		}
		if tc.topo == Etcd3 && cfg.TTLms != 1000 {
			t.Errorf("etcd-3 lease %d ms, want whole seconds (1000)", cfg.TTLms)
		}
		if !slices.Equal(cfg.Gates, []gatePoint{gateStart}) || cfg.GateUntil != 1 {
			t.Errorf("%s worker-crash: gates %v until %d", tc.topo, cfg.Gates, cfg.GateUntil)
		}
	}
	// A worker refuses settings its lock cannot honour.
	for _, cfg := range []workerConfig{
		{Lock: lockAdvisory, Fencing: "claim-first"},
		{Lock: lockEtcd, Fencing: "none", Nodes: []string{"127.0.0.1:1"}, TTLms: 1500},
		{Lock: lockEtcd, Fencing: "none", TTLms: 1000},
		{Lock: lockRow, Fencing: "write-only"},
		{Lock: lockZK, Fencing: "none", TTLms: 1000},                                              // no servers
		{Lock: lockZK, Fencing: "none", Nodes: []string{"127.0.0.1:1"}, TTLms: 2000},              // a session the servers do not allow
		{Lock: lockZK, Fencing: "none", Nodes: []string{"127.0.0.1:1"}, TTLms: 1000, PollMs: 100}, // the recipe cannot poll
		{Lock: "chubby", Fencing: "none"},
	} {
		if svc, err := newLockService(cfg); err == nil {
			svc.close()
			t.Errorf("newLockService(%+v) accepted", cfg)
		}
	}
}

// TestKillTwoByQuorum: kill-2 leaves redlock-5 a majority, so its workers
// keep their usual settings; on etcd-3 it does not, so they give up soon.
func TestKillTwoByQuorum(t *testing.T) {
	for _, tc := range []struct {
		topo             string
		lockMs, maxFails int
	}{
		{Redlock5, 10_000, 0},
		{Etcd3, 2000, 2},
		{ZK3, 2000, 2},
	} {
		tp := lookupTopology(tc.topo)
		sc := Scenario{Topology: tc.topo, Fault: "kill-2", Fencing: "none", Workers: 2, Sections: 3, TTL: tp.ttl, Work: quickWork}
		_, f, err := resolve(sc)
		if err != nil {
			t.Fatal(err)
		}
		c := fakeCluster(t, tp.lockNodes, 2)
		cfg := newWorkerConfig(&env{sc: sc, seed: 1, topo: tp, fault: f, cluster: c}, "dsn", 0)
		if cfg.LockMs != tc.lockMs || cfg.MaxFail != tc.maxFails {
			t.Errorf("%s kill-2: lock wait %d ms, max failures %d; want %d, %d", tc.topo, cfg.LockMs, cfg.MaxFail, tc.lockMs, tc.maxFails)
		}
	}
	if leavesNoQuorum(2, 5) || !leavesNoQuorum(3, 5) || leavesNoQuorum(1, 3) || !leavesNoQuorum(2, 3) {
		t.Error("leavesNoQuorum disagrees with a majority of 3 of 5 and 2 of 3")
	}
}
