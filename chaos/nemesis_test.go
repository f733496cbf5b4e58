package chaos

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// TestLasting: a soak of d is timed runs adding up to d, none longer than
// soakSegment, each with a name (and so a seed) of its own.
func TestLasting(t *testing.T) {
	soak, err := LookupProfile("soak")
	if err != nil {
		t.Fatal(err)
	}
	// Each nemesis lasts d: one of them.
	p, err := soak.Filter(nil, []string{"nemesis"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		d    time.Duration
		runs int
	}{
		{time.Minute, 1}, {soakSegment, 1}, {time.Hour, 6}, {time.Hour + time.Minute, 7},
	} {
		q, err := p.Lasting(tc.d)
		if err != nil {
			t.Fatal(err)
		}
		var sum time.Duration
		names := map[string]bool{}
		for _, s := range q.Runs {
			if s.Duration <= 0 || s.Duration > soakSegment {
				t.Errorf("Lasting(%v): a run of %v", tc.d, s.Duration)
			}
			sum += s.Duration
			names[s.Name()] = true
		}
		if len(q.Runs) != tc.runs || sum != tc.d || len(names) != tc.runs {
			t.Errorf("Lasting(%v): %d runs (%d names) of %v in all, want %d of %v", tc.d, len(q.Runs), len(names), sum, tc.runs, tc.d)
		}
	}
	if _, err := p.Lasting(time.Second); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Errorf("Lasting(1s): %v, want too short", err)
	}
	smoke, err := LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := smoke.Lasting(time.Hour); err == nil || !strings.Contains(err.Error(), "no timed runs") {
		t.Errorf("smoke.Lasting: %v, want no timed runs", err)
	}
}

// TestJudgeNemesis: the nemesis's judge fails a run in which a
// misconfigured client got a lease or was never refused, a configured one
// was refused or starved, a panic stopped the panicking client, or the
// tokens went backwards; and passes a clean one.
func TestJudgeNemesis(t *testing.T) {
	cfgs := make([]workerConfig, len(nemesisClients))
	for w := range cfgs {
		cfgs[w] = workerConfig{ID: w, TTLms: 200, Nodes: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}, Dial: []string{"a", "b", "c"}}
		nemesisWorker(w, &cfgs[w])
	}
	clean := func() (*history, []*workerStats) {
		h := &history{}
		stats := make([]*workerStats, len(nemesisClients))
		for w, c := range nemesisClients {
			st := &workerStats{}
			if c.aliased {
				// granted before its second name answered, refused after
				h.sections = append(h.sections, check.Section{Worker: w, Got: int64(w), Deadline: int64(w) + 1})
				st.Accepted, st.Refused, st.Failures, st.RefusedError = 1, 3, 3, "redlock: nodes 0 (...) and 4 (...) are the same Redis server"
			} else if c.refused {
				st.Refused, st.Failures, st.RefusedError = 3, 3, "redlock: node 0 ... every client of a deployment must use the same nodes"
			} else {
				h.sections = append(h.sections, check.Section{Worker: w, Got: int64(w), Deadline: int64(w) + 1})
				st.Accepted, st.Panics, st.AfterPanic, st.Extends = 1, 1, 1, 1
			}
			stats[w] = st
		}
		return h, stats
	}
	refusedW, grantedW, panicW, aliasW := -1, -1, -1, -1
	for w, c := range nemesisClients {
		switch {
		case c.aliased:
			aliasW = w
		case c.refused && refusedW < 0:
			refusedW = w
		case !c.refused && grantedW < 0:
			grantedW = w
		}
		if cfgs[w].Style == styleDoPanic {
			panicW = w
		}
	}
	if refusedW < 0 || grantedW < 0 || panicW < 0 || aliasW < 0 {
		t.Fatalf("the nemesis lacks a refused (%d), a granted (%d), a panicking (%d) or an aliased client (%d)", refusedW, grantedW, panicW, aliasW)
	}
	for _, tc := range []struct {
		name  string
		spoil func(r *Result, h *history, st []*workerStats)
		want  string
	}{
		{"clean", func(*Result, *history, []*workerStats) {}, ""},
		{"misconfigured granted", func(_ *Result, h *history, _ []*workerStats) {
			h.sections = append(h.sections, check.Section{Worker: refusedW})
		}, "yet got 1 leases"},
		{"misconfigured not refused", func(_ *Result, _ *history, st []*workerStats) { st[refusedW].Refused = 0 }, "never refused"},
		{"node listed twice never refused", func(_ *Result, _ *history, st []*workerStats) { st[aliasW].Refused = 0 }, "second name for node 0"},
		{"configured refused", func(_ *Result, _ *history, st []*workerStats) { st[grantedW].Refused = 1 }, "yet was refused"},
		{"configured starved", func(_ *Result, h *history, _ []*workerStats) {
			h.sections = h.sections[1:]
		}, "never got the lock"},
		{"stuck after a panic", func(_ *Result, _ *history, st []*workerStats) { st[panicW].AfterPanic = 0 }, "leases after the first"},
		{"no statistics", func(_ *Result, _ *history, st []*workerStats) { st[grantedW] = nil }, "left no statistics"},
		{"valid overlap", func(r *Result, _ *history, _ []*workerStats) { r.ValidOverlaps = 1 }, "overlaps of valid lease windows"},
		{"grant inversion", func(r *Result, _ *history, _ []*workerStats) { r.GrantInversions = 2 }, "2 grants with a fencing token"},
		{"resource inversion", func(r *Result, _ *history, _ []*workerStats) { r.TokenInversions = 1 }, "older token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, st := clean()
			r := &Result{}
			tc.spoil(r, h, st)
			bad := judgeNemesis(&env{cfgs: cfgs}, r, h, st)
			got := strings.Join(bad, "; ")
			switch {
			case tc.want == "" && len(bad) > 0:
				t.Errorf("a clean run failed: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("got %q, want a failure containing %q", got, tc.want)
			}
			if len(r.Nemesis) != len(nemesisClients) {
				t.Errorf("%d clients reported, want %d", len(r.Nemesis), len(nemesisClients))
			}
		})
	}
}

// TestNemesisClients: however a client names and orders the nodes, each
// name still goes with its own node's link, the well-configured clients
// differ from the first in names, order or network, and the misconfigured
// ones in max ttl or drift.
func TestNemesisClients(t *testing.T) {
	base := workerConfig{TTLms: 200}
	for i := range 5 {
		base.Nodes = append(base.Nodes, fmt.Sprintf("127.0.0.1:%d", 7000+i))
		base.Dial = append(base.Dial, fmt.Sprintf("proxy-of-%d", 7000+i))
	}
	looks := map[string]bool{}
	for w, c := range nemesisClients {
		cfg := base
		cfg.Nodes, cfg.Dial = slices.Clone(base.Nodes), slices.Clone(base.Dial)
		nemesisWorker(w, &cfg)
		if len(cfg.Nodes) != 5 || len(cfg.Dial) != 5 {
			t.Fatalf("%s: %d names, %d links", c.name, len(cfg.Nodes), len(cfg.Dial))
		}
		for i := range cfg.Nodes {
			_, port, _ := strings.Cut(cfg.Nodes[i], ":")
			if cfg.Dial[i] != "proxy-of-"+port {
				t.Errorf("%s: node %q dials %q", c.name, cfg.Nodes[i], cfg.Dial[i])
			}
		}
		mismatch := cfg.MaxTTLms > 0 && cfg.MaxTTLms != base.TTLms || cfg.Drift > 0
		if mismatch != c.refused {
			t.Errorf("%s: settings %d ms / drift %v, expected refused %v", c.name, cfg.MaxTTLms, cfg.Drift, c.refused)
		}
		if !c.refused && !c.aliased {
			looks[fmt.Sprint(cfg.Network, cfg.Nodes)] = true
		}
		if c.aliased != (cfg.AliasDownMs > 0) {
			t.Errorf("%s: alias down for %d ms, expected aliased %v", c.name, cfg.AliasDownMs, c.aliased)
		}
	}
	if len(looks) < 4 {
		t.Errorf("only %d ways of naming the nodes among the well-configured clients", len(looks))
	}
}

// TestNemesisKinds checks the schedule's vocabulary: distinct names, and
// the rule that keeps the lock available (at most two nodes impaired,
// except by the kinds whose point is to take three at once).
func TestNemesisKinds(t *testing.T) {
	for _, mix := range [][]weightedKind{nemesisKinds, restartHeavy} {
		seen := map[string]bool{}
		for _, k := range mix {
			if k.kind == nil || k.kind.inject == nil || k.weight <= 0 {
				t.Fatalf("bad entry in a schedule: %+v", k)
			}
			if seen[k.kind.name] {
				t.Errorf("kind %q listed twice in one schedule", k.kind.name)
			}
			seen[k.kind.name] = true
		}
	}
	cases := []struct {
		kind           *nemesisKind
		free, impaired int
		want           bool
	}{
		{kindRestartEmpty, 4, 1, true},
		{kindRestartEmpty, 3, 2, false},
		{kindPause, 3, 2, false},
		{kindRollingRestart, 5, 0, true},
		{kindRollingRestart, 4, 1, true},
		{kindRollingRestart, 3, 2, false},
		{kindRestart3, 3, 2, true},
		{kindRestart3, 2, 3, false},
		{kindFlush3, 5, 0, true},
		{kindFlush3, 2, 3, false},
		{kindWorkerFreeze, 0, 5, true},
	}
	for _, c := range cases {
		if got := c.kind.fits(c.free, c.impaired); got != c.want {
			t.Errorf("%s fits with %d free, %d impaired = %v, want %v", c.kind.name, c.free, c.impaired, got, c.want)
		}
	}
}

// TestJudgeNemesisReconfig: the reconfiguration nemesis's judge fails a
// run in which a change got stuck, a run with the wrong old settings was
// taken, no change to T was done, a side's client was never granted or
// never refused, or the tokens went backwards; and passes a clean one.
func TestJudgeNemesisReconfig(t *testing.T) {
	f := lookupFault("nemesis-reconfig")
	if f == nil {
		t.Fatal("no fault nemesis-reconfig")
	}
	nodes := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4", "127.0.0.1:5"}
	cfgs := make([]workerConfig, len(reconfigClients))
	for w := range cfgs {
		cfgs[w] = workerConfig{ID: w, TTLms: 1000, Nodes: slices.Clone(nodes), Dial: []string{"a", "b", "c", "d", "e"}}
		f.worker(w, &cfgs[w])
	}
	clean := func() (*Result, *history, []*workerStats) {
		r := &Result{FaultCounts: map[string]int{"reconfigure-T": 2, "reconfigure-done-T": 2, "reconfigure-S": 1, "reconfigure-done-S": 1}}
		h := &history{}
		stats := make([]*workerStats, len(reconfigClients))
		for w := range reconfigClients {
			h.sections = append(h.sections, check.Section{Worker: w, Got: int64(w), Deadline: int64(w) + 1})
			stats[w] = &workerStats{Accepted: 1, Panics: 1, AfterPanic: 1, Extends: 1, Refused: 2, Failures: 2}
		}
		return r, h, stats
	}
	sW, tW := -1, -1
	for w, c := range reconfigClients {
		switch {
		case c.changed && tW < 0:
			tW = w
		case !c.changed && sW < 0:
			sW = w
		}
		if c.changed && len(cfgs[w].Nodes) != len(reconfigTNodes) {
			t.Errorf("worker %d (%s), a client of T, lists %d nodes, want %d", w, c.name, len(cfgs[w].Nodes), len(reconfigTNodes))
		}
	}
	for _, tc := range []struct {
		name  string
		spoil func(r *Result, h *history, st []*workerStats)
		want  string
	}{
		{"clean", func(*Result, *history, []*workerStats) {}, ""},
		{"stuck", func(r *Result, _ *history, _ []*workerStats) { r.FaultCounts["reconfigure-stuck"] = 1 }, "not done after 40 runs"},
		{"slip taken", func(r *Result, _ *history, _ []*workerStats) { r.FaultCounts["reconfigure-slip-taken"] = 1 }, "wrong old max ttl returned nil"},
		{"no change", func(r *Result, _ *history, _ []*workerStats) { delete(r.FaultCounts, "reconfigure-done-T") }, "no change to T"},
		{"T starved", func(_ *Result, h *history, _ []*workerStats) {
			h.sections = slices.DeleteFunc(h.sections, func(s check.Section) bool { return s.Worker == tW })
		}, "never got the lock"},
		{"S never refused", func(_ *Result, _ *history, st []*workerStats) { st[sW].Refused = 0 }, "was never refused"},
		{"valid overlap", func(r *Result, _ *history, _ []*workerStats) { r.ValidOverlaps = 1 }, "overlaps of valid lease windows"},
		{"resource inversion", func(r *Result, _ *history, _ []*workerStats) { r.TokenInversions = 1 }, "older token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, h, st := clean()
			tc.spoil(r, h, st)
			got := strings.Join(judgeNemesisReconfig(&env{cfgs: cfgs}, r, h, st), "; ")
			switch {
			case tc.want == "" && got != "":
				t.Errorf("a clean run failed: %s", got)
			case tc.want != "" && !strings.Contains(got, tc.want):
				t.Errorf("got %q, want a failure containing %q", got, tc.want)
			}
		})
	}
}
