package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/quorumlock/quorumlock/bench/internal/suite"
)

func TestParseLoadAvg(t *testing.T) {
	got, err := parseLoadAvg("2.72 1.71 2.00 3/266 4379\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{2.72, 1.71, 2}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"", "1.0 2.0", "1.0 x 3.0 1/2 3"} {
		if l, err := parseLoadAvg(bad); err == nil {
			t.Errorf("parseLoadAvg(%q) = %v, want an error", bad, l)
		}
	}
}

// --help prints the flags in the style of quorumlock run's (--ttl
// duration) on stdout, and lists the scenarios from the suite's registry.
func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help: exit %d, stderr %q", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"Usage: quorumlock-bench [--quick] [--scenarios S,...] [--json FILE]", "\n  --ttl duration\n", "\n  --scenarios scenarios\n", "\n  --quick\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\n  -quick") {
		t.Errorf("--help uses single-dash flags:\n%s", out)
	}
	_, doc, _ := strings.Cut(out, "\n  --scenarios ")
	doc, _, _ = strings.Cut(doc, "\n  --")
	for _, s := range suite.All {
		if !strings.Contains(doc, s) {
			t.Errorf("--help of --scenarios does not list %q:\n%s", s, doc)
		}
	}
	// Every scenario the JSON's results can carry is one --scenarios
	// accepts (uncontended-fenced was not).
	for _, s := range []string{"uncontended", "uncontended-fenced", "slow-node", "two-down", "contended", "contended-separate", "many-keys", "renew-many"} {
		if !slices.Contains(suite.All, s) {
			t.Errorf("--scenarios does not accept %q", s)
		}
	}
	stdout.Reset()
	if code := run([]string{"--no-such-flag"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "--help") {
		t.Errorf("bad flag: exit %d, stderr %q; want 2 and a pointer to --help", code, stderr.String())
	}
}

func TestRenewLeasesFlagRefusesBadSizes(t *testing.T) {
	var stdout, stderr strings.Builder
	if code := run([]string{"--renew-leases", "1000,lots"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), `"lots"`) {
		t.Errorf("exit %d, stderr %q; want 2 and the bad size named", code, stderr.String())
	}
}
