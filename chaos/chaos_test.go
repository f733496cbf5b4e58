package chaos_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
)

// TestChaosSmokeVerdicts runs the smoke profile against real processes and
// checks the verdicts docs/chaos.md promises, run by run.
func TestChaosSmokeVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dozens of redis-server processes and PostgreSQL")
	}
	p, err := chaos.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	history := t.TempDir()
	rep := runProfile(t, p, 42, history)
	if len(rep.Runs) != len(p.Runs) {
		t.Fatalf("%d runs reported, %d scheduled", len(rep.Runs), len(p.Runs))
	}
	// Every run that got as far as its checks left its history, one row
	// per section it reported.
	for _, r := range rep.Runs {
		if r.Sections == 0 {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(history, fmt.Sprintf("*_%d.csv", r.Seed)))
		if len(files) != 1 {
			t.Errorf("%s/%s/%s: %d history files, want 1", r.Topology, r.Fault, r.Fencing, len(files))
			continue
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if rows := strings.Count(string(b), "\n") - 1; rows != r.Sections {
			t.Errorf("%s: %d rows, the run reported %d sections", filepath.Base(files[0]), rows, r.Sections)
		}
	}
	get := func(topo, fault, mode string) chaos.Result {
		t.Helper()
		for _, r := range rep.Runs {
			if r.Topology == topo && r.Fault == fault && r.Fencing == mode {
				return r
			}
		}
		t.Fatalf("no run %s/%s/%s", topo, fault, mode)
		return chaos.Result{}
	}
	for _, r := range rep.Runs {
		if !r.Pass {
			failedRun(t, r)
		}
	}
	// The same verdicts, spelled out, so that a change to the profile's
	// expectations cannot quietly weaken them.
	for _, f := range []string{"kill-2", "partition-2"} {
		if r := get(chaos.Redlock5, f, "none"); r.Overlaps != 0 || r.DuringFault == 0 {
			t.Errorf("redlock-5 %s: overlaps %d, granted during the fault %d; want 0 and > 0", f, r.Overlaps, r.DuringFault)
		}
	}
	if r := get(chaos.Redlock5, "kill-3", "none"); r.Sections != 0 || !strings.Contains(r.Error, "no quorum") {
		t.Errorf("redlock-5 kill-3: %d sections, error %q; want none and a no-quorum error", r.Sections, r.Error)
	}
	if r := get(chaos.Redlock5, "restart-empty", "none"); r.Overlaps != 0 {
		t.Errorf("restart-empty with quarantine: overlaps %d, want 0", r.Overlaps)
	}
	if r := get(chaos.Redlock5, "restart-empty-no-quarantine", "none"); r.Overlaps == 0 {
		t.Errorf("restart-empty without quarantine: no overlap, want > 0")
	}
	if r := get(chaos.SingleReplica, "failover", "none"); r.Overlaps == 0 {
		t.Errorf("single+replica failover: no overlap, want > 0")
	}
	if r := get(chaos.Redlock5, "worker-freeze", "none"); r.LostUpdates == 0 {
		t.Errorf("worker-freeze without fencing: no lost update, want > 0")
	}
	for _, m := range []string{"claim-first", "fence-table"} {
		if r := get(chaos.Redlock5, "worker-freeze", m); r.LostUpdates != 0 {
			t.Errorf("worker-freeze %s: %d lost updates, want 0", m, r.LostUpdates)
		}
	}
	if r := get(chaos.Redlock5, "clock-jump", "none"); r.Overlaps == 0 {
		t.Errorf("clock-jump without fencing: no overlap, want > 0")
	}
	if r := get(chaos.Redlock5, "clock-jump", "claim-first"); r.LostUpdates != 0 || r.Rejected == 0 {
		t.Errorf("clock-jump claim-first: lost %d, rejected %d; want 0 and > 0", r.LostUpdates, r.Rejected)
	}
}

func TestChaosBadNames(t *testing.T) {
	if _, err := chaos.LookupProfile("fast"); err == nil || !strings.Contains(err.Error(), `unknown profile "fast"`) {
		t.Errorf("unknown profile: %v", err)
	}
	p, err := chaos.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                   string
		topo, fault, mode, msg string
	}{
		{"topology", "triple", "", "", `unknown topology "triple"`},
		{"fault", "", "kill-9", "", `unknown fault "kill-9"`},
		{"fencing", "", "", "paper", `unknown fencing mode "paper"`},
		{"empty match", chaos.Single, "kill-3", "", "no run matching"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var topo, fault, mode []string
			if tc.topo != "" {
				topo = []string{tc.topo}
			}
			if tc.fault != "" {
				fault = []string{tc.fault}
			}
			if tc.mode != "" {
				mode = []string{tc.mode}
			}
			if _, err := p.Filter(topo, fault, mode); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want an error containing %q", err, tc.msg)
			}
		})
	}
}

// TestChaosPortInUse: a fixed port that is taken is a clear error, and
// nothing is left running (TestMain checks for leftover children).
func TestChaosPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	b := backend(t)
	b.PostgresPort = port
	p, err := chaos.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = chaos.Run(ctx, p, 1, chaos.Options{Backend: b, WorkerCommand: workerCommand})
	if err == nil || !strings.Contains(err.Error(), "port "+strconv.Itoa(port)+" on 127.0.0.1 is in use") {
		t.Fatalf("got %v, want a port-in-use error", err)
	}
}

// TestChaosPolling: --poll keeps the stall runs and makes their waiters
// poll TryLock; a polling run finishes its sections, and with claim-first
// it still loses nothing. Out-of-range intervals and a selection without
// stall runs are errors.
func TestChaosPolling(t *testing.T) {
	quick, err := chaos.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	smoke, err := chaos.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p     chaos.Profile
		every time.Duration
		msg   string
	}{
		{quick, -time.Millisecond, "out of range"},
		{quick, 500 * time.Microsecond, "out of range"},
		{quick, 2 * time.Second, "out of range"},
		{quick, 1500 * time.Microsecond, "not a whole number of milliseconds"},
		{smoke, 20 * time.Millisecond, "applies to the stall runs"},
	} {
		if _, err := tc.p.Polling(tc.every); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Polling(%v) on %s: %v, want an error containing %q", tc.every, tc.p.Name, err, tc.msg)
		}
	}
	if p, err := quick.Polling(0); err != nil || len(p.Runs) != len(quick.Runs) {
		t.Errorf("Polling(0) changed the profile: %d of %d runs, %v", len(p.Runs), len(quick.Runs), err)
	}
	p, err := quick.Filter(nil, []string{"stall"}, []string{"claim-first"})
	if err == nil {
		p, err = p.Polling(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Runs) != 1 || !strings.HasSuffix(p.Runs[0].Name(), "/poll=20ms") {
		t.Fatalf("polling runs %+v, want the one claim-first stall run, named with its interval", p.Runs)
	}
	if testing.Short() {
		return
	}
	rep := runProfile(t, p, 7, "")
	r := rep.Runs[0]
	want := p.Runs[0].Workers * p.Runs[0].Sections
	if r.PollMs != 20 || r.Accepted != want || r.LostUpdates != 0 || !r.Pass {
		t.Errorf("polling run: poll %d ms, %d of %d accepted, %d lost, pass %v (%v); want 20 ms, all, 0, true",
			r.PollMs, r.Accepted, want, r.LostUpdates, r.Pass, r.Failure)
	}
	// The workers themselves report the refusals they slept after: with
	// four of them on one key and 300 ms stalls, some must have waited.
	// (PollMs above only echoes the scenario.)
	if r.Polls == 0 {
		t.Errorf("the polling run reports no TryLock refusals: the workers did not poll")
	}
}

// TestChaosNemesis runs a seeded minute of the randomized multi-client
// nemesis and checks its verdicts one by one: no two valid
// leases at once, tokens in grant order and at the resource, nothing lost
// under claim-first, every misconfigured client refused with a
// *redlock.ConfigError and never granted, the others granted, and the
// faults of every kind injected. QUORUMLOCK_NEMESIS_SEED picks another
// seed (to reproduce a soak's run: its suite seed and --run #N).
func TestChaosNemesis(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a minute of faults on five redis-server processes and PostgreSQL")
	}
	seed := uint64(11)
	if s := os.Getenv("QUORUMLOCK_NEMESIS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("QUORUMLOCK_NEMESIS_SEED=%q: %v", s, err)
		}
		seed = n
	}
	p := faultRuns(t, "soak", "nemesis")
	if len(p.Runs) != 1 || p.Runs[0].Fault != "nemesis" || p.Runs[0].Duration != time.Minute {
		t.Fatalf("the soak profile is %+v, want one minute of the nemesis", p.Runs)
	}
	t.Logf("nemesis seed %d", seed)
	r := runNemesis(t, p, seed)
	// The verdicts, spelled out, so that a change to the fault's judge
	// cannot quietly weaken them.
	if r.ValidOverlaps != 0 || r.Overlaps != 0 {
		t.Errorf("overlaps of valid windows %d (to the section's end %d), want 0", r.ValidOverlaps, r.Overlaps)
	}
	if r.GrantInversions != 0 || r.TokenInversions != 0 {
		t.Errorf("token inversions: %d in grant order, %d at the resource; want 0", r.GrantInversions, r.TokenInversions)
	}
	if r.LostUpdates != 0 || r.Accepted == 0 {
		t.Errorf("claim-first: %d lost of %d committed, want 0 of > 0", r.LostUpdates, r.Accepted)
	}
	if r.Unfenced == nil || r.Unfenced.Accepted == 0 {
		t.Errorf("the unfenced client committed nothing: %+v", r.Unfenced)
	}
	if len(r.Nemesis) != p.Runs[0].Workers {
		t.Fatalf("%d clients reported, want %d", len(r.Nemesis), p.Runs[0].Workers)
	}
	refused := 0
	for _, w := range r.Nemesis {
		switch {
		case w.Aliased && (w.Refusals == 0 || !strings.Contains(w.RefusalError, "same Redis server")):
			t.Errorf("client %q, node 0 listed twice: %d refusals (%q); want > 0, saying they are the same Redis server", w.Client, w.Refusals, w.RefusalError)
		case w.Aliased:
		case w.Refused && (w.Granted != 0 || w.Refusals == 0):
			t.Errorf("misconfigured client %q: %d leases, %d refusals; want 0 and > 0", w.Client, w.Granted, w.Refusals)
		case w.Refused && !strings.Contains(w.RefusalError, "every client of a deployment must use the same"):
			t.Errorf("misconfigured client %q: refusal %q does not say what to fix", w.Client, w.RefusalError)
		case !w.Refused && w.Refusals != 0, !w.Refused && !w.Polling && w.Granted == 0:
			t.Errorf("client %q: %d leases, %d refusals; want > 0 and 0", w.Client, w.Granted, w.Refusals)
		}
		if w.Refused {
			refused++
		}
	}
	if refused == 0 {
		t.Error("no misconfigured client in the nemesis")
	}
	for _, kind := range []string{"restart-empty", "pause", "partition", "slow"} {
		if r.FaultCounts[kind] == 0 {
			t.Errorf("no %s fault in a minute (faults: %v)", kind, r.FaultCounts)
		}
	}
}

// TestChaosNemesisElection: 30 s of the nemesis's faults with every
// worker a candidate in one leader election: no two leaderships valid at
// once, terms that only grow at the grant and at the resource, no lost
// update, and more than one candidate led.
func TestChaosNemesisElection(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 30 s of faults on five redis-server processes and PostgreSQL")
	}
	p, err := faultRuns(t, "soak", "nemesis-election").Lasting(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := runNemesis(t, p, 17)
	if r.ValidOverlaps != 0 || r.Overlaps != 0 {
		t.Errorf("leaderships valid at once: %d (to the section's end %d), want 0", r.ValidOverlaps, r.Overlaps)
	}
	if r.GrantInversions != 0 || r.TokenInversions != 0 {
		t.Errorf("terms that went backwards: %d in grant order, %d at the resource; want 0", r.GrantInversions, r.TokenInversions)
	}
	if r.LostUpdates != 0 || r.Accepted == 0 {
		t.Errorf("claim-first: %d lost of %d committed, want 0 of > 0", r.LostUpdates, r.Accepted)
	}
	led := 0
	for _, w := range r.Nemesis {
		if w.Granted > 0 {
			led++
		}
	}
	if led < 2 {
		t.Errorf("%d candidates led, want at least 2: %+v", led, r.Nemesis)
	}
	t.Logf("faults: %v", r.FaultCounts)
}

// TestChaosNemesisReconfig: 30 s of the nemesis with the deployment
// reconfigured from one settings to the other and back, under the node
// faults, with runs cut short and rerun: no overlap, no inversion, no lost
// update, every change done, and each side's clients granted and refused.
func TestChaosNemesisReconfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 30 s of faults and reconfigurations on five redis-server processes and PostgreSQL")
	}
	p, err := faultRuns(t, "soak", "nemesis-reconfig").Lasting(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := runNemesis(t, p, 13)
	if r.ValidOverlaps != 0 || r.GrantInversions != 0 || r.TokenInversions != 0 || r.LostUpdates != 0 || r.Accepted == 0 {
		t.Errorf("overlaps %d, grant inversions %d, token inversions %d, lost %d of %d committed; want 0, 0, 0, 0 of > 0",
			r.ValidOverlaps, r.GrantInversions, r.TokenInversions, r.LostUpdates, r.Accepted)
	}
	if r.FaultCounts["reconfigure-done-T"] == 0 || r.FaultCounts["reconfigure-stuck"] != 0 {
		t.Errorf("changes: %v; want one to T done and none stuck", r.FaultCounts)
	}
	for _, w := range r.Nemesis {
		if w.Granted == 0 || w.Refusals == 0 {
			t.Errorf("client %q: %d leases, %d refusals; want both > 0", w.Client, w.Granted, w.Refusals)
		}
	}
}

// TestChaosNemesisFindsDoubleGrants: the nemesis's twin with every
// client's restart quarantine off must find overlaps of valid windows, so
// that the nemesis's zeros mean something. Its fenced resource still loses
// nothing.
func TestChaosNemesisFindsDoubleGrants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 45 s of faults on five redis-server processes and PostgreSQL")
	}
	p := faultRuns(t, "quick", "nemesis-no-quarantine")
	rep := runProfile(t, p, 21, "")
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs reported, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	if r.Quarantine || r.ValidOverlaps == 0 || r.Overlaps == 0 {
		t.Errorf("quarantine %v, overlaps of valid windows %d (to the section's end %d); want off, > 0 and > 0",
			r.Quarantine, r.ValidOverlaps, r.Overlaps)
	}
	if r.LostUpdates != 0 || r.TokenInversions != 0 {
		t.Errorf("claim-first under double grants: %d lost, %d token inversions at the resource; want 0 and 0", r.LostUpdates, r.TokenInversions)
	}
}

// faultRuns is profile's runs of fault.
func faultRuns(t *testing.T, profile, fault string) chaos.Profile {
	t.Helper()
	p, err := chaos.LookupProfile(profile)
	if err == nil {
		p, err = p.Filter(nil, []string{fault}, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runNemesis runs p, one nemesis run, logs its soak table and fails the
// test unless the run passed its own checks.
func runNemesis(t *testing.T, p chaos.Profile, seed uint64) chaos.Result {
	t.Helper()
	rep := runProfile(t, p, seed, "")
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs reported, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	var table strings.Builder
	chaos.WriteSoak(&table, rep)
	t.Log(table.String())
	if !r.Pass {
		t.Errorf("%s (seed %d): %s\n  what the nemesis did: %s", r.Fault, r.Seed, strings.Join(r.Failure, "; "), strings.Join(r.Schedule, "; "))
	}
	return r
}
