package suite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestRenewFigures(t *testing.T) {
	c := renewCounts{
		leases: 10, held: 10, lost: 1, window: 10 * time.Second, period: time.Second,
		sent: []impl.TripCount{{Trips: 20, Cmds: 100}, {Trips: 10, Cmds: 100}},
		node: []nodestats.Stats{
			{Calls: map[string]int64{"evalsha": 100, "get": 100, "info": 2}, CPU: 0.5},
			{Calls: map[string]int64{"evalsha": 100}, CPU: 0.5},
		},
		clientCPU: 2 * time.Second, cpuOK: true,
		lockPhase: impl.TripCount{Trips: 50, Cmds: 50}, lockPhaseNode: 200, lockPhaseTime: time.Second,
		releasePhase: impl.TripCount{Trips: 50, Cmds: 60}, releasePhaseNode: 150,
		clientBytes: 81920, goroutines: 15, nodeBytes: 9500, fnBytes: 25000, fnGoroutines: 10,
	}
	r := RenewFigures(c)
	eq := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	eq("SentCmdsPerSec", r.SentCmdsPerSec, 20)
	eq("TripsPerPeriodMax", r.TripsPerPeriodMax, 2)
	eq("CmdsPerLeasePeriod", r.CmdsPerLeasePeriod, 1)
	eq("NodeCmdsPerSec", r.NodeCmdsPerSec, 30)
	eq("NodesCPU", r.NodesCPU, 0.1)
	eq("PeriodMs", r.PeriodMs, 1000)
	eq("ClientBytesPerLease", r.ClientBytesPerLease, 8192)
	eq("FnGoroutineBytes", r.FnGoroutineBytes, 2500)       // the idle run's 10 goroutines
	eq("ClientBytesBeyondFn", r.ClientBytesBeyondFn, 5692) // what the lease added beyond
	eq("GoroutinesPerLease", r.GoroutinesPerLease, 0.5)    // the idle run's 10 left out
	eq("NodeBytesPerLease", r.NodeBytesPerLease, 950)
	eq("NodeCmdsPerLeasePeriod", r.NodeCmdsPerLeasePeriod, 3) // 300 commands, 10 leases, 10 periods

	// The row carries the per-lease figures at its top too (the JSON's
	// readers look for them there).
	row := renewResult(RenewMany, "quorumlock", "v", c)
	if row.Leases == nil || *row.Leases != 10 || row.LeasesLost == nil || *row.LeasesLost != 1 ||
		row.NodeCmdsPerLeasePeriod == nil || *row.NodeCmdsPerLeasePeriod != 3 ||
		row.ClientBytesPerLease == nil || *row.ClientBytesPerLease != 8192 ||
		row.ClientBytesBeyondFn == nil || *row.ClientBytesBeyondFn != 5692 ||
		row.GoroutinesPerLease == nil || *row.GoroutinesPerLease != 0.5 {
		t.Errorf("renewResult's top-level figures: %+v", row)
	}
	if r.ClientCPU == nil {
		t.Fatal("ClientCPU missing")
	}
	eq("ClientCPU", *r.ClientCPU, 0.2)
	if !slices.Equal(r.TripsPerPeriodNode, []float64{2, 1}) || !slices.Equal(r.SentCmdsPerSecNode, []float64{10, 10}) ||
		!slices.Equal(r.NodeCmdsPerSecNode, []float64{20, 10}) {
		t.Errorf("per node: trips %v, sent %v, executed %v", r.TripsPerPeriodNode, r.SentCmdsPerSecNode, r.NodeCmdsPerSecNode)
	}
	if want := map[string]int64{"evalsha": 200, "get": 100}; !maps.Equal(r.NodeCmds, want) {
		t.Errorf("NodeCmds = %v, want %v (the readings' INFO left out)", r.NodeCmds, want)
	}
	if r.Lost != 1 || r.Held != 10 || r.LockPhaseCmds != 50 || r.LockPhaseNodeCmds != 200 || r.ReleasePhaseCmds != 60 || r.ReleasePhaseNodeCmds != 150 {
		t.Errorf("counts copied wrong: %+v", r)
	}

	c.cpuOK = false
	if r := RenewFigures(c); r.ClientCPU != nil {
		t.Errorf("ClientCPU = %v when it could not be measured", *r.ClientCPU)
	}
	c.window = 0
	r = RenewFigures(c)
	for name, v := range map[string]float64{"SentCmdsPerSec": r.SentCmdsPerSec, "TripsPerPeriodMax": r.TripsPerPeriodMax, "NodeCmdsPerSec": r.NodeCmdsPerSec} {
		if v != 0 {
			t.Errorf("zero window: %s = %v, want 0", name, v)
		}
	}
}

// TestRenewWindowSeesALostLease holds three leases with each
// implementation's holder, deletes one of them on every node mid-window,
// and checks that exactly that one is reported lost and the others were
// renewed through the window.
func TestRenewWindowSeesALostLease(t *testing.T) {
	ns := testenv.RedisNodes(t, 5)
	addrs := make([]string, len(ns))
	probes := make([]*redis.Client, len(ns))
	for i, n := range ns {
		addrs[i] = n.Addr()
		probes[i] = n.Client(t)
	}
	ctx := context.Background()
	if err := bootstrap(ctx, Config{TTL: RenewTTL}, addrs); err != nil {
		t.Fatal(err)
	}
	holders := map[string]func(*impl.Trips, string) (holdFn, func() int, func(), error){
		"quorumlock": qlHold(addrs, RenewTTL),
		"redsync":    rsHold(addrs),
	}
	for name, mk := range holders {
		t.Run(name, func(t *testing.T) {
			const leases, window = 3, 4 * time.Second
			prefix := testenv.Key(t)
			trips := impl.NewTrips(len(addrs))
			hold, late, closeFn, err := mk(trips, prefix)
			if err != nil {
				t.Fatal(err)
			}
			defer closeFn()
			if (late != nil) != (name == "quorumlock") {
				t.Errorf("late releases counted: %v, want only for quorumlock's Do", late != nil)
			}
			// The three are taken within the first period; 1.5 s in, all
			// are held and each has been renewed at most once.
			var wg sync.WaitGroup
			wg.Go(func() {
				time.Sleep(1500 * time.Millisecond)
				for _, p := range probes {
					p.Del(ctx, prefix+":1")
				}
			})
			c, err := renewWindow(ctx, leases, window, RenewPeriod(RenewTTL), trips, probes, hold, nil, nil)
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if c.held != leases || c.lost != 1 || c.errs != 0 {
				t.Errorf("held %d, lost %d, errors %d (%v); want %d, 1, 0", c.held, c.lost, c.errs, c.first, leases)
			}
			// The one lost is reported with what ended it, learned in the
			// window, its key not named.
			why := lossCounts(c.lostWhy)
			if len(why) != 1 || why[0].Phase != phaseWindow || why[0].Count != 1 || why[0].Reason == "" || strings.Contains(why[0].Reason, prefix) {
				t.Errorf("lost_why %+v, want one lease learned lost in the window, with a reason that does not name its key", why)
			} else {
				t.Logf("%s: lost because %s", name, why[0].Reason)
			}
			// Two leases renewed about once a second on every node for 4 s.
			for i, s := range c.sent {
				if s.Cmds < 2*3 || s.Cmds > 3*6 {
					t.Errorf("node %d: %d commands in the window, want about 8", i, s.Cmds)
				}
			}
			// Each held key takes memory on the nodes. (The goroutine
			// count of three leases is within the noise of the release's
			// own: renew-many reads it at 1,000 leases and up.)
			if c.nodeBytes <= 0 {
				t.Errorf("holding %d leases, the nodes grew by %d bytes; want more than 0", leases, c.nodeBytes)
			}
			if r := RenewFigures(c); r.NodeCmdsPerSec <= r.SentCmdsPerSec {
				t.Errorf("nodes executed %v commands/s for %v sent: the scripts' own commands are missing", r.NodeCmdsPerSec, r.SentCmdsPerSec)
			}
			if n := int64(len(addrs)); c.lockPhase.Cmds < leases*n || c.releasePhase.Cmds < (leases-1)*n {
				t.Errorf("lock phase %d commands, release phase %d: want at least one per lease and node", c.lockPhase.Cmds, c.releasePhase.Cmds)
			}
			// Given up, the keys leave the nodes: at most one per lease and
			// node is left when the phase ends, and soon none.
			if err := keysFreed(ctx, &c, probes, prefix, leases, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			if n := int64(len(addrs)); c.keysLeft < 0 || c.keysLeft > leases*n || c.keysGone < 0 {
				t.Errorf("keys left %d, gone after %v: want 0 to %d left, then gone", c.keysLeft, c.keysGone, leases*n)
			}
		})
	}
}

// keysFreed counts the leases' keys left, says so when one stays past
// its bound, and how long it took once none is left; keys of other
// leases and other names do not count.
func TestKeysFreedSaysWhenAKeyStays(t *testing.T) {
	ns := testenv.RedisNodes(t, 2)
	probes := []*redis.Client{ns[0].Client(t), ns[1].Client(t)}
	ctx := context.Background()
	prefix := testenv.Key(t)
	for _, k := range []string{prefix + ":1", prefix + ":3", prefix + ":x", "other"} {
		if err := probes[1].Set(ctx, k, "held", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := probes[0].Set(ctx, prefix+":1", "held", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	c := renewCounts{releaseEnd: time.Now()}
	if err := keysFreed(ctx, &c, probes, prefix, 3, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.keysLeft != 2 || c.keysGone != -1 {
		t.Errorf("left %d, gone after %v: want 2 (lease 1 on both nodes; lease 3 is beyond the 3 leases) and -1", c.keysLeft, c.keysGone)
	}
	if r := RenewFigures(c); r.KeysGoneAfterS != -1 || r.KeysLeftAfterRelease != 2 {
		t.Errorf("keys_left_after_release %d, keys_gone_after_s %v, want 2 and -1", r.KeysLeftAfterRelease, r.KeysGoneAfterS)
	}
	probes[0].Del(ctx, prefix+":1")
	probes[1].Del(ctx, prefix+":1")
	if err := keysFreed(ctx, &c, probes, prefix, 3, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if c.keysGone < 300*time.Millisecond {
		t.Errorf("gone after %v, want the time since releaseEnd (at least the 300 ms waited before)", c.keysGone)
	}
}

// TestIdleCostCountsTheWaitingGoroutines: the baseline that renew-many
// takes off a Do lease's figures is one goroutine each, of about one
// goroutine's stack (2 KB at the least) and its wrapping, not nothing and
// not a lease's worth.
func TestIdleCostCountsTheWaitingGoroutines(t *testing.T) {
	ns := testenv.RedisNodes(t, 1)
	probes := []*redis.Client{ns[0].Client(t)}
	const n = 2000
	bytes, goroutines, err := idleCost(context.Background(), n, 100*time.Millisecond, probes)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(bytes) / n
	t.Logf("%.0f bytes per waiting goroutine; %d goroutines for %d", per, goroutines, n)
	if per < 2048 || per > 6144 {
		t.Errorf("idle goroutine: %.0f bytes each, want 2 to 6 KB", per)
	}
	if goroutines < n || goroutines > n+10 {
		t.Errorf("%d goroutines counted for %d waiting ones", goroutines, n)
	}
}

// TestLossCounts: reasons come most frequent first, and past ten the
// rest (here 3 of 13) are summed into one, so that a run that lost leases for many
// reasons still reports how many it lost.
func TestLossCounts(t *testing.T) {
	m := map[lossKey]int{}
	for i := range 12 {
		m[lossKey{phaseWindow, fmt.Sprintf("reason %02d", i)}] = i + 1
	}
	m[lossKey{phaseRelease, "reason 11"}] = 40
	got := lossCounts(m)
	if len(got) != 11 {
		t.Fatalf("%d entries, want 11: %+v", len(got), got)
	}
	if got[0] != (LossCount{phaseRelease, "reason 11", 40}) || got[1] != (LossCount{phaseWindow, "reason 11", 12}) {
		t.Errorf("first two %+v, want the release's 40 then the window's 12", got[:2])
	}
	total := 0
	for _, l := range got {
		total += l.Count
	}
	if want := 40 + 12*13/2; total != want || got[10].Reason != "other reasons" || got[10].Count != 1+2+3 {
		t.Errorf("total %d, last %+v; want %d, the three least frequent summed (6)", total, got[10], want)
	}
}

// TestLossReason: the key is taken out of a reason however the library
// quotes it, so that the leases lost for one reason count as one.
func TestLossReason(t *testing.T) {
	key := "qlbench:1796670596679901572:renew-many:renew-many:quorumlock:2:61234"
	for _, msg := range []string{
		`redlock: lease not held: "qlbench:1796670596679901572:renew-many:renew-many:quorumlock:2:6"... (68 bytes) had expired or was lost before Release`,
		`redlock: lease not held: "` + key + `" had expired or was lost before Release`,
		`redlock: lease not held: ` + key + ` had expired or was lost before Release`,
	} {
		if got, want := lossReason(errors.New(msg), key), "redlock: lease not held: KEY had expired or was lost before Release"; got != want {
			t.Errorf("lossReason(%q) = %q, want %q", msg, got, want)
		}
	}
	other := `extend failed on "10.0.0.1:6379"`
	if got := lossReason(errors.New(other), key); got != other {
		t.Errorf("a quoted string that is not the key was changed: %q", got)
	}
}

// qlHold counts the library's own Warn: a Do lease held when fn returned
// whose release lands only after its validity (every node frozen from
// the moment fn returns until 300 ms past the ttl) is counted as ran out
// after fn, not as lost. Guards against the counter's message drifting
// from the library's, which would read 0 in every run.
func TestQLHoldCountsTheLibrarysLateReleaseWarn(t *testing.T) {
	ns := testenv.RedisNodes(t, 5)
	addrs := make([]string, len(ns))
	for i, n := range ns {
		addrs[i] = n.Addr()
	}
	ctx := context.Background()
	const ttl = time.Second
	if err := bootstrap(ctx, Config{TTL: ttl}, addrs); err != nil {
		t.Fatal(err)
	}
	hold, late, closeFn, err := qlHold(addrs, ttl)(impl.NewTrips(len(addrs)), testenv.Key(t))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	stop := make(chan struct{})
	thawed := make(chan struct{})
	var lost []string
	held := func() {
		taken := time.Now()
		for _, n := range ns {
			if err := n.Pause(); err != nil {
				t.Error(err)
			}
		}
		time.AfterFunc(time.Until(taken.Add(ttl+300*time.Millisecond)), func() {
			defer close(thawed)
			for _, n := range ns {
				if err := n.Resume(); err != nil {
					t.Error(err)
				}
			}
		})
		close(stop)
	}
	err = hold(ctx, 0, held, func(why string) { lost = append(lost, why) }, stop)
	<-thawed
	if err != nil || len(lost) != 0 {
		t.Fatalf("hold returned %v, lost %q: want a lease that only ran out after fn", err, lost)
	}
	if n := late(); n != 1 {
		t.Errorf("counted %d leases that ran out after fn, want 1", n)
	}
}

// TestWarnCounter: the bench counts Do's Warn for a lease that ran out
// after fn returned, and nothing else.
func TestWarnCounter(t *testing.T) {
	w := &warnCounter{msg: "redlock: Do's lease ran out after fn returned"}
	log := slog.New(w)
	log.Warn("redlock: Do's lease ran out after fn returned, before its release", "key", "k")
	log.Warn("redlock: extend failed", "key", "k")
	log.Info("redlock: Do's lease ran out after fn returned, before its release")
	log.With("a", 1).Warn("redlock: Do's lease ran out after fn returned, before its release")
	if got := w.n.Load(); got != 2 {
		t.Errorf("counted %d, want 2 (the two Warns with the message)", got)
	}
}
