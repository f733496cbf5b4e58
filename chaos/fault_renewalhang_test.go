package chaos_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
)

// renewalHangRuns returns the renewal-hang runs of a profile.
func renewalHangRuns(t *testing.T, profile string) chaos.Profile {
	t.Helper()
	p, err := chaos.LookupProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	p, err = p.Filter(nil, []string{"renewal-hang"}, nil)
	if err != nil {
		t.Fatalf("profile %s: %v", profile, err)
	}
	return p
}

// TestRenewalHangRuns: the fault is registered, and each of its runs
// demands that renewal kept the hung holder's lease past one TTL (200 ms)
// until the hold cap (600 ms) ended it.
func TestRenewalHangRuns(t *testing.T) {
	if !slices.Contains(chaos.FaultNames(), "renewal-hang") {
		t.Fatalf("renewal-hang is not among %v", chaos.FaultNames())
	}
	for profile, want := range map[string]int{"smoke": 1, "quick": 2} {
		p := renewalHangRuns(t, profile)
		if len(p.Runs) != want {
			t.Errorf("profile %s has %d renewal-hang runs, want %d", profile, len(p.Runs), want)
		}
		for _, s := range p.Runs {
			e := s.Expect
			if s.Topology != chaos.Redlock5 || e.Overlaps != chaos.Zero || e.MinBlock != 3*time.Second ||
				e.MaxBlock != 4500*time.Millisecond || e.MinBlock <= s.TTL || s.TTL != time.Second {
				t.Errorf("%s: %+v, want redlock-5, TTL 1s, no overlaps, blocked 3s to 4.5s", s.Name(), s)
			}
			if s.Fencing == "claim-first" && (e.Lost != chaos.Zero || !e.Rejection) {
				t.Errorf("%s: claim-first must lose nothing and reject the hung writer: %+v", s.Name(), e)
			}
		}
	}
}

// TestRenewalHangVerdicts runs the smoke run against real processes: the
// others waited for the hold cap, not one TTL and not forever, and no two
// valid leases coexisted.
func TestRenewalHangVerdicts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and PostgreSQL")
	}
	rep := runProfile(t, renewalHangRuns(t, "smoke"), 42, "")
	if len(rep.Runs) != 1 {
		t.Fatalf("%d runs reported, want 1", len(rep.Runs))
	}
	r := rep.Runs[0]
	if !r.Pass {
		t.Errorf("renewal-hang (seed %d): %s", r.Seed, strings.Join(r.Failure, "; "))
	}
	if r.Overlaps != 0 || r.BlockedMs < 3000 || r.BlockedMs > 4500 {
		t.Errorf("renewal-hang: overlaps %d, others blocked %d ms; want 0 and 3000-4500 ms", r.Overlaps, r.BlockedMs)
	}
}
