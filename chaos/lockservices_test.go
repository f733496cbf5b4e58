package chaos_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
)

// TestChaosLockServices runs the quick profile's runs of the two other
// lock services that the verdicts of docs/chaos.md's comparison rest on,
// against real etcd members and PostgreSQL, and checks those verdicts one
// by one (the runs' own expectations are checked too, as in every run).
func TestChaosLockServices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd clusters and PostgreSQL")
	}
	if _, err := exec.LookPath("etcd"); err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("QUORUMLOCK_REQUIRE_BACKENDS") == "1" {
			t.Fatalf("etcd is not installed (Debian: etcd-server): %v", err)
		}
		t.Skipf("etcd is not installed (Debian: etcd-server): %v", err)
	}
	quick, err := chaos.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := quick.Filter([]string{chaos.Etcd3}, []string{"kill-1", "kill-2", "partition-1", "worker-freeze"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := quick.Filter([]string{chaos.PgAdvisory}, []string{"worker-freeze", "worker-crash", "db-restart"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := runChecked(t, chaos.Profile{Name: "quick", Runs: append(etcd.Runs, pg.Runs...)}, 11)

	// etcd: one member of three down leaves a quorum; two do not, and
	// the refusal says so.
	if r := get(chaos.Etcd3, "kill-1", "none"); r.Overlaps != 0 || r.DuringFault == 0 {
		t.Errorf("etcd-3 kill-1: overlaps %d, granted after the kill %d; want 0 and > 0", r.Overlaps, r.DuringFault)
	}
	if r := get(chaos.Etcd3, "kill-2", "none"); r.Sections != 0 || !strings.Contains(r.Error, "no quorum") {
		t.Errorf("etcd-3 kill-2: %d sections, error %q; want none and a no-quorum error", r.Sections, r.Error)
	}
	// The leader cut off from its peers grants its client nothing (the
	// run's judge fails on any grant to it), and the majority elects
	// another and grants.
	if r := get(chaos.Etcd3, "partition-1", "none"); r.Overlaps != 0 || r.DuringFault == 0 || r.BlockedMs <= 0 {
		t.Errorf("etcd-3 partition-1: overlaps %d, granted during the cut %d, majority again after %d ms; want 0, > 0, > 0",
			r.Overlaps, r.DuringFault, r.BlockedMs)
	}
	// A holder frozen past its session lease writes late: an update is
	// lost unless the resource checks the lock key's revision.
	if r := get(chaos.Etcd3, "worker-freeze", "none"); r.LostUpdates == 0 || r.LateSections == 0 {
		t.Errorf("etcd-3 worker-freeze without fencing: lost %d, late sections %d; want both > 0", r.LostUpdates, r.LateSections)
	}
	if r := get(chaos.Etcd3, "worker-freeze", "claim-first"); r.LostUpdates != 0 || r.Rejected == 0 || r.TokenInversions != 0 {
		t.Errorf("etcd-3 worker-freeze claim-first: lost %d, rejected %d, token inversions %d; want 0, > 0, 0",
			r.LostUpdates, r.Rejected, r.TokenInversions)
	}

	requireTransactionLockVerdicts(t, get, chaos.PgAdvisory)
}

// TestChaosZooKeeper runs the quick profile's runs of a ZooKeeper
// ensemble, a lock of docs/chaos.md's table, and checks the table's
// verdicts on them one by one (the runs' own expectations and judges are
// checked too). ZooKeeper (with a Java runtime) is installed by make test
// and CI; without it the test skips, except with CI=true,
// QUORUMLOCK_REQUIRE_BACKENDS=1 or QUORUMLOCK_REQUIRE_ZOOKEEPER=1, where its
// absence is a failure.
func TestChaosZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper ensembles and PostgreSQL")
	}
	if err := chaos.ZooKeeperInstalled(); err != nil {
		if os.Getenv("QUORUMLOCK_REQUIRE_ZOOKEEPER") == "1" || os.Getenv("QUORUMLOCK_REQUIRE_BACKENDS") == "1" || os.Getenv("CI") == "true" {
			t.Fatalf("%v (make deps-chaos installs it)", err)
		}
		t.Skipf("%v (make deps-chaos installs it), and neither CI=true nor QUORUMLOCK_REQUIRE_ZOOKEEPER=1 is set", err)
	}
	get := runQuick(t, chaos.ZK3, 25)

	// ZooKeeper: one server of three down leaves a quorum; two do not,
	// and the refusal says so.
	if r := get(chaos.ZK3, "kill-1", "none"); r.Overlaps != 0 || r.DuringFault == 0 {
		t.Errorf("zk-3 kill-1: overlaps %d, granted after the kill %d; want 0 and > 0", r.Overlaps, r.DuringFault)
	}
	if r := get(chaos.ZK3, "kill-2", "none"); r.Sections != 0 || !strings.Contains(r.Error, "no quorum") {
		t.Errorf("zk-3 kill-2: %d sections, error %q; want none and a no-quorum error", r.Sections, r.Error)
	}
	if r := get(chaos.ZK3, "pause-leader", "none"); r.Overlaps != 0 || r.Accepted != 4*40 {
		t.Errorf("zk-3 pause-leader: overlaps %d, %d accepted; want 0 and 160", r.Overlaps, r.Accepted)
	}
	// A server cut off from its peers serves its client nothing (the
	// run's judge fails on any grant to it), and the majority grants.
	if r := get(chaos.ZK3, "partition-1", "none"); r.Overlaps != 0 || r.DuringFault == 0 || r.BlockedMs <= 0 {
		t.Errorf("zk-3 partition-1: overlaps %d, granted during the cut %d, majority again after %d ms; want 0, > 0, > 0",
			r.Overlaps, r.DuringFault, r.BlockedMs)
	}
	// A holder frozen past its session writes late: an update is lost
	// unless the resource checks the lock znode's czxid.
	if r := get(chaos.ZK3, "worker-freeze", "none"); r.LostUpdates == 0 || r.LateSections == 0 {
		t.Errorf("zk-3 worker-freeze without fencing: lost %d, late sections %d; want both > 0", r.LostUpdates, r.LateSections)
	}
	if r := get(chaos.ZK3, "worker-freeze", "claim-first"); r.LostUpdates != 0 || r.Rejected == 0 || r.TokenInversions != 0 {
		t.Errorf("zk-3 worker-freeze claim-first: lost %d, rejected %d, token inversions %d; want 0, > 0, 0",
			r.LostUpdates, r.Rejected, r.TokenInversions)
	}
	// A crashed holder's znode lasts until its session expires: the
	// others wait about the session timeout, not more than a tick and
	// the client's own delays beyond it.
	if r := get(chaos.ZK3, "worker-crash", "none"); r.BlockedMs < 500 || r.BlockedMs > 2500 || r.Overlaps != 0 {
		t.Errorf("zk-3 worker-crash: blocked %d ms, overlaps %d; want [500, 2500] ms and 0", r.BlockedMs, r.Overlaps)
	}
	if r := get(chaos.ZK3, "stall", "none"); r.LostUpdates != 0 || r.Overlaps != 0 {
		t.Errorf("zk-3 stall: lost %d, overlaps %d; want 0", r.LostUpdates, r.Overlaps)
	}
}

// TestChaosRowLock runs the quick profile's runs of the PostgreSQL row
// lock, a lock of docs/chaos.md's table, and checks the table's verdicts
// on them one by one.
func TestChaosRowLock(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	get := runQuick(t, chaos.PgRow, 25)
	requireTransactionLockVerdicts(t, get, chaos.PgRow)
	if r := get(chaos.PgRow, "stall", "none"); r.LostUpdates != 0 || r.Overlaps != 0 {
		t.Errorf("pg-row stall: lost %d, overlaps %d; want 0", r.LostUpdates, r.Overlaps)
	}
}

// requireTransactionLockVerdicts checks the verdicts docs/chaos.md's
// table gives a lock held by the transaction that writes the data
// (pg-row, pg-advisory): no lease, so a frozen holder keeps it, loses
// nothing, and the others wait for the whole freeze; a crashed holder's
// connection dies with it, and the server rolls its transaction back and
// frees the lock at once; nothing is granted while the database is down,
// and the workers go on once it is back.
func requireTransactionLockVerdicts(t *testing.T, get func(topo, fault, mode string) chaos.Result, topo string) {
	t.Helper()
	r := get(topo, "worker-freeze", "none")
	if r.LostUpdates != 0 || r.Overlaps != 0 || r.StaleOverlaps != 0 {
		t.Errorf("%s worker-freeze: lost %d, overlaps %d, stale overlaps %d; want 0", topo, r.LostUpdates, r.Overlaps, r.StaleOverlaps)
	}
	if blocked := time.Duration(r.BlockedMs) * time.Millisecond; blocked < 2*time.Second {
		t.Errorf("%s worker-freeze: others blocked %v, want the whole 2s freeze", topo, blocked)
	}
	r = get(topo, "worker-crash", "none")
	if r.BlockedMs <= 0 || r.BlockedMs > 1000 || r.LostUpdates != 0 {
		t.Errorf("%s worker-crash: blocked %d ms, lost %d; want (0, 1000] ms and 0", topo, r.BlockedMs, r.LostUpdates)
	}
	// A commit the restart cut off after the database made it durable
	// counts in the history, while its worker saw an error and goes on
	// to another section: more than 160 is such a commit, not a loss (the
	// counter agrees with the history, LostUpdates).
	r = get(topo, "db-restart", "none")
	if r.DuringFault != 0 || r.Accepted < 4*40 || r.LostUpdates != 0 || r.LockFailures == 0 {
		t.Errorf("%s db-restart: %d granted while down, %d accepted, %d lost, %d failed lock calls; want 0, at least 160, 0, > 0",
			topo, r.DuringFault, r.Accepted, r.LostUpdates, r.LockFailures)
	}
}

// runQuick runs the quick profile's runs on topo with seed, as
// runChecked.
func runQuick(t *testing.T, topo string, seed uint64) func(topo, fault, mode string) chaos.Result {
	t.Helper()
	quick, err := chaos.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	p, err := quick.Filter([]string{topo}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return runChecked(t, p, seed)
}

// runChecked runs p with seed, fails the test for each run that did not
// show what it must, and returns a lookup of its runs.
func runChecked(t *testing.T, p chaos.Profile, seed uint64) func(topo, fault, mode string) chaos.Result {
	t.Helper()
	rep := runProfile(t, p, seed, "")
	if len(rep.Runs) != len(p.Runs) {
		t.Fatalf("%d runs reported, %d scheduled", len(rep.Runs), len(p.Runs))
	}
	for _, r := range rep.Runs {
		if !r.Pass {
			failedRun(t, r)
		}
	}
	return func(topo, fault, mode string) chaos.Result {
		t.Helper()
		for _, r := range rep.Runs {
			if r.Topology == topo && r.Fault == fault && r.Fencing == mode {
				return r
			}
		}
		t.Fatalf("no run %s/%s/%s", topo, fault, mode)
		return chaos.Result{}
	}
}
