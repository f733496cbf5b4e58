package report

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/suite"
)

func f(v float64) *float64 { return &v }

// verdicts maps each target's name to whether it was met.
func verdicts(ts []Target) map[string]bool {
	m := map[string]bool{}
	for _, t := range ts {
		m[t.Name] = t.Met
	}
	return m
}

func TestTargetsIssue14(t *testing.T) {
	const (
		mkThroughput = "many keys: throughput / redsync's"
		mkFloor      = "many keys: pipelined floor's throughput / quorumlock's"
		sepWaiter    = "contended, 8 Clients: waiter Lock p99 / redsync's"
		sepTput      = "contended, 8 Clients: throughput / redsync's"
		sepShare     = "contended, 8 Clients: share of acquisitions by a waiter"
		allocs       = "allocs per Lock+Release / redsync's"
		lost         = "renew: leases lost while held under Do"
		trips        = "renew-many: round trips per node per renewal period (1000 leases)"
		growth       = "renew: round trips per period, 1000 / 100 leases"
	)
	mk := func(impl string, ops float64) suite.Result {
		return suite.Result{Scenario: suite.ManyKeys, Impl: impl, Samples: 100, OpsPerSec: ops}
	}
	renew := func(scenario string, leases, lost int, trips float64) suite.Result {
		return suite.Result{Scenario: scenario, Impl: "quorumlock", Samples: 10,
			Renew: &suite.RenewStats{Leases: leases, Held: leases, Lost: lost, TripsPerPeriodMax: trips, WindowS: 30, PeriodMs: 1000}}
	}
	unc := func(impl string, a float64) suite.Result {
		return suite.Result{Scenario: suite.Uncontended, Impl: impl, Samples: 100, P50us: 250, AllocsPerOp: f(a)}
	}
	cont := func(scenario, impl string, ops, waiterP99, share float64) suite.Result {
		return suite.Result{Scenario: scenario, Impl: impl, Samples: 100, OpsPerSec: ops, WaiterP99us: f(waiterP99), WaiterShare: f(share)}
	}
	cases := []struct {
		name string
		rs   []suite.Result
		want map[string]bool // target -> met; absent from the map: must not be judged
	}{
		{"many keys met", []suite.Result{mk("floor", 4000), mk("redsync", 1800), mk("quorumlock", 3000)},
			map[string]bool{mkThroughput: true, mkFloor: true}},
		{"many keys missed", []suite.Result{mk("floor", 13000), mk("redsync", 1800), mk("quorumlock", 1700)},
			map[string]bool{mkThroughput: false, mkFloor: false}},
		{"many keys at the limits", []suite.Result{mk("floor", 4500), mk("redsync", 2000), mk("quorumlock", 3000)},
			map[string]bool{mkThroughput: true, mkFloor: true}},
		{"many keys without redsync", []suite.Result{mk("floor", 4000), mk("quorumlock", 3000)},
			map[string]bool{mkFloor: true}},
		{"renew batched", []suite.Result{renew(suite.RenewFew, 100, 0, 2), renew(suite.RenewMany, 1000, 0, 3)},
			map[string]bool{lost: true, trips: true, growth: true}},
		{"renew per lease", []suite.Result{renew(suite.RenewFew, 100, 0, 100), renew(suite.RenewMany, 1000, 0, 994)},
			map[string]bool{lost: true, trips: false, growth: false}},
		{"renew lost a lease", []suite.Result{renew(suite.RenewFew, 100, 1, 2), renew(suite.RenewMany, 1000, 0, 3)},
			map[string]bool{lost: false, trips: true, growth: true}},
		{"renew few made no round trip", []suite.Result{renew(suite.RenewFew, 100, 0, 0), renew(suite.RenewMany, 1000, 0, 3)},
			map[string]bool{lost: true, trips: true}},
		{"separate Clients met", []suite.Result{
			cont(suite.Contended, "redsync", 2900, 1_000_000, 0.01),
			cont(suite.ContendedSeparate, "quorumlock", 2400, 90_000, 0.5)},
			map[string]bool{sepWaiter: true, sepTput: true, sepShare: true}},
		{"separate Clients missed", []suite.Result{
			cont(suite.Contended, "redsync", 2900, 1_000_000, 0.01),
			cont(suite.ContendedSeparate, "quorumlock", 1300, 120_000, 0.46)},
			map[string]bool{sepWaiter: false, sepTput: false, sepShare: false}},
		{"allocations", []suite.Result{unc("redsync", 141), unc("quorumlock", 189)},
			map[string]bool{allocs: false}},
		{"allocations met", []suite.Result{unc("redsync", 141), unc("quorumlock", 141)},
			map[string]bool{allocs: true}},
	}
	judged := []string{mkThroughput, mkFloor, sepWaiter, sepTput, sepShare, allocs, lost, trips, growth}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := verdicts(Targets(c.rs, 400*time.Millisecond))
			for _, name := range judged {
				want, judge := c.want[name]
				met, ok := got[name]
				switch {
				case judge && !ok:
					t.Errorf("%q not judged", name)
				case !judge && ok:
					t.Errorf("%q judged without its inputs", name)
				case judge && met != want:
					t.Errorf("%q met = %v, want %v", name, met, want)
				}
			}
		})
	}
}

func TestTargetMeasuredValues(t *testing.T) {
	rs := []suite.Result{
		{Scenario: suite.ManyKeys, Impl: "floor", Samples: 1, OpsPerSec: 6000},
		{Scenario: suite.ManyKeys, Impl: "quorumlock", Samples: 1, OpsPerSec: 2000},
		{Scenario: suite.RenewMany, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 1000, Held: 1000, TripsPerPeriodMax: 994.5}},
		{Scenario: suite.RenewFew, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 100, Held: 100, TripsPerPeriodMax: 99.45}},
	}
	want := map[string]float64{
		"many keys: pipelined floor's throughput / quorumlock's":            3,
		"renew-many: round trips per node per renewal period (1000 leases)": 994.5,
		"renew: round trips per period, 1000 / 100 leases":                  10,
	}
	for _, tg := range Targets(rs, 400*time.Millisecond) {
		if w, ok := want[tg.Name]; ok {
			if d := tg.Measured - w; d > 1e-9 || d < -1e-9 {
				t.Errorf("%s: measured %v, want %v", tg.Name, tg.Measured, w)
			}
			delete(want, tg.Name)
		}
	}
	for name := range want {
		t.Errorf("%s: not judged", name)
	}
}

// The round-trip targets are judged on the 1,000-lease run only: a scale
// run of 100,000 leases alone, whose chunks of 256 make hundreds of calls
// per node per period, is not reported as missing them.
func TestTargetsJudgeRoundTripsAt1000LeasesOnly(t *testing.T) {
	big := suite.Result{Scenario: suite.RenewMany, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 100000, Held: 100000, TripsPerPeriodMax: 309}}
	few := suite.Result{Scenario: suite.RenewFew, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 100, Held: 100, TripsPerPeriodMax: 5}}
	for _, tg := range Targets([]suite.Result{few, big}, 400*time.Millisecond) {
		if strings.Contains(tg.Name, "round trips") {
			t.Errorf("judged %q on a run without 1,000 leases", tg.Name)
		}
	}
	small := suite.Result{Scenario: suite.RenewMany, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 1000, Held: 1000, TripsPerPeriodMax: 9}}
	judged := 0
	for _, tg := range Targets([]suite.Result{few, big, small}, 400*time.Millisecond) {
		if strings.Contains(tg.Name, "round trips") {
			judged++
			if !strings.Contains(tg.Name, "1000") {
				t.Errorf("judged %q, want the 1,000-lease run", tg.Name)
			}
		}
	}
	if judged != 2 {
		t.Errorf("%d round-trip targets judged, want 2", judged)
	}
}

func TestNum(t *testing.T) {
	cases := []struct {
		v    float64
		unit string
		want string
	}{
		{0.46, "share", "46%"},
		{1.34, "x", "1.34x"},
		{0.0281, "x", "0.028x"},
		{356.04, "x", "3.6e+02x"},
		{3, "n", "3"},
		{994.47, "", "994.47"},
		{401.2, "ms", "401 ms"},
	}
	for _, c := range cases {
		if got := num(c.v, c.unit); got != c.want {
			t.Errorf("num(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
}

func TestRowsKeepRenewRunsApart(t *testing.T) {
	rs := []suite.Result{
		{Scenario: suite.ManyKeys, Impl: "quorumlock", Samples: 1},
		{Scenario: suite.RenewMany, Impl: "quorumlock", Renew: &suite.RenewStats{Leases: 1000, TripsPerPeriodNode: []float64{1, 2}}},
	}
	if got := Rows(rs); len(got) != 1 || got[0][0] != suite.ManyKeys {
		t.Errorf("Rows = %v, want the many-keys row only", got)
	}
	rr := RenewRows(rs)
	if len(rr) != 1 || len(rr[0]) != len(RenewHeader) {
		t.Fatalf("RenewRows = %v, want one row of %d columns", rr, len(RenewHeader))
	}
	if rr[0][10] != "1.0 2.0" {
		t.Errorf("round trips per node column = %q, want %q", rr[0][10], "1.0 2.0")
	}
}

func TestLoad(t *testing.T) {
	if got := Load([]float64{2.72, 1.7, 2}); got != "2.72 1.70 2.00" {
		t.Errorf("Load = %q", got)
	}
	if got := Load(nil); got != "unknown" {
		t.Errorf("Load(nil) = %q", got)
	}
}

func TestCostRows(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	rs := []suite.Result{
		{Scenario: suite.Uncontended, Impl: "quorumlock", OpsPerSec: 2000},
		{Scenario: suite.ManyKeys, Impl: "floor", OpsPerSec: 20000, NodesCPUusPerOp: f(30), ClientCPUusPerOp: f(60)},
		{Scenario: suite.ManyKeys, Impl: "quorumlock", OpsPerSec: 5000, NodesCPUusPerOp: f(100)},
	}
	cr := CostRows(rs)
	if len(cr) != 2 || len(cr[0]) != len(CostHeader) {
		t.Fatalf("CostRows = %v, want the two many-keys rows of %d columns", cr, len(CostHeader))
	}
	// 90 µs of CPU per operation at 20,000 operations a second: 1.8 cores.
	if cr[0][9] != "90" || cr[0][10] != "1.80" {
		t.Errorf("floor: CPU µs/op %q, cores busy %q; want 90 and 1.80", cr[0][9], cr[0][10])
	}
	// Without the client's CPU there is no total to give.
	if cr[1][7] != "100" || cr[1][9] != "-" || cr[1][10] != "-" {
		t.Errorf("quorumlock: nodes CPU %q, total %q, busy %q; want 100, -, -", cr[1][7], cr[1][9], cr[1][10])
	}
}

func TestTargetsRenewSizes(t *testing.T) {
	// beyond is the client bytes per lease beyond fn's goroutine, which
	// costs fn bytes more.
	size := func(leases, held, lost int, beyond, fn, goroutines float64) suite.Result {
		return suite.Result{Scenario: suite.RenewMany, Impl: "quorumlock", Samples: 1,
			Renew: &suite.RenewStats{Leases: leases, Held: held, Lost: lost, WindowS: 60, PeriodMs: 1000,
				ClientBytesPerLease: beyond + fn, FnGoroutineBytes: fn, ClientBytesBeyondFn: beyond, GoroutinesPerLease: goroutines}}
	}
	missed := func(rs ...suite.Result) []string {
		var out []string
		for _, tg := range Targets(rs, 150*time.Millisecond) {
			if !tg.Met {
				out = append(out, tg.Name)
			}
		}
		return out
	}
	if m := missed(size(10000, 10000, 0, 6000, 2500, 0.05), size(100000, 100000, 0, 7500, 2500, 0)); len(m) != 0 {
		t.Errorf("every lease kept, cheap: missed %v", m)
	}
	for name, tc := range map[string]struct {
		rs   []suite.Result
		want int
	}{
		"lost at the second size":          {[]suite.Result{size(10000, 10000, 0, 6000, 2500, 0), size(100000, 100000, 3, 6000, 2500, 0)}, 1},
		"never held":                       {[]suite.Result{size(10000, 9990, 0, 6000, 2500, 0)}, 1},
		"heavy beyond fn, so in all too":   {[]suite.Result{size(10000, 10000, 0, 21000, 2500, 0)}, 2},
		"light beyond fn, heavy with fn's": {[]suite.Result{size(10000, 10000, 0, 9000, 2500, 0)}, 1},
		"a goroutine too many":             {[]suite.Result{size(10000, 10000, 0, 6000, 2500, 1.2)}, 1},
	} {
		if m := missed(tc.rs...); len(m) != tc.want {
			t.Errorf("%s: missed %v, want %d targets", name, m, tc.want)
		}
	}
}
