package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestCheck_ExitsWithTheVerdict: a new deployment cannot vote yet (exit 4,
// with bootstrap as the fix), a bootstrapped one is fit (exit 0, JSON for
// scripts), and one node with an evicting policy makes it unsafe (exit 5,
// the node and the setting named).
func TestCheck_ExitsWithTheVerdict(t *testing.T) {
	nodes := emptyRedisNodes(t, 5)
	arg := nodesArg(nodes)

	r := runCLI(t, "", nil, "check", "--nodes", arg)
	if r.code != exitCheckUnavailable || !strings.Contains(r.stdout, "quorumlock bootstrap") || !strings.Contains(r.stdout, "unavailable:") {
		t.Fatalf("check of a new deployment: exit %d, want %d\n%s%s", r.code, exitCheckUnavailable, r.stdout, r.stderr)
	}
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg); r.code != 0 {
		t.Fatalf("bootstrap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r = runCLI(t, "", nil, "check", "--nodes", arg, "--json", "--key", "app:report")
	var rep checkReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("check --json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	if r.code != exitOK || rep.Verdict != "ok" || rep.Fit != 5 || len(rep.Nodes) != 5 {
		t.Fatalf("check of a bootstrapped deployment: exit %d, verdict %q, %d fit\n%s", r.code, rep.Verdict, rep.Fit, r.stdout)
	}
	for _, n := range rep.Nodes {
		if !n.Fit || n.Eviction != "noeviction" || n.Save == nil || *n.Save != "" || n.ClockOffsetMS == nil || len(n.Problems) != 0 {
			t.Errorf("node %d: %+v", n.Node, n)
		}
	}

	if err := nodes[3].Client(t).ConfigSet(context.Background(), "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, "", nil, "check", "--nodes", arg)
	if r.code != exitCheckUnsafe || !strings.Contains(r.stdout, "node 3 ("+nodes[3].Addr()+") unsafe: maxmemory-policy is volatile-lru") {
		t.Fatalf("check with an evicting node: exit %d, want %d\n%s%s", r.code, exitCheckUnsafe, r.stdout, r.stderr)
	}
}

// TestCheck_TheSameAddressTwiceIsAUsageError: the list itself is wrong,
// which shows without contacting a node, so there is no report to make.
// (Two addresses that reach one server show only on contact: exit 125.)
func TestCheck_TheSameAddressTwiceIsAUsageError(t *testing.T) {
	nodes := emptyRedisNodes(t, 3)
	arg := nodesArg(nodes) + "," + nodes[0].Addr()
	r := runCLI(t, "", nil, "check", "--nodes", arg)
	if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "same address") {
		t.Fatalf("check with a node listed twice: exit %d, want %d\n%s%s", r.code, exitUsage, r.stdout, r.stderr)
	}
}

// TestCheck_AReplicaInTheListIsReportedUnsafe: a node that replicates
// another is a problem check names, with the unsafe exit, not a start-up
// error that leaves no report.
func TestCheck_AReplicaInTheListIsReportedUnsafe(t *testing.T) {
	nodes := emptyRedisNodes(t, 5)
	arg := nodesArg(nodes)
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg); r.code != 0 {
		t.Fatalf("bootstrap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	ctx := context.Background()
	if err := nodes[4].Client(t).Do(ctx, "REPLICAOF", "127.0.0.1", fmt.Sprint(nodes[0].Port())).Err(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", nil, "check", "--nodes", arg)
	want := "node 4 (" + nodes[4].Addr() + ") unsafe: is a slave, not a primary"
	if r.code != exitCheckUnsafe || !strings.Contains(r.stdout, want) {
		t.Fatalf("check with a replica in the list: exit %d, want %d and %q\n%s%s", r.code, exitCheckUnsafe, want, r.stdout, r.stderr)
	}
}
