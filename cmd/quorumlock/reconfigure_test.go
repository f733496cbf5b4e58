package main

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// The reconfigure command on real nodes: a deployment in use moves to a
// shorter max ttl and one node replaced by a fresh one; afterwards the old
// settings get the configuration exit code and the new ones lock.
func TestReconfigure_MovesADeploymentInUse(t *testing.T) {
	nodes := emptyRedisNodes(t, 4)
	oldArg, newArg := nodesArg(nodes[:3]), nodesArg([]*testenv.RedisNode{nodes[0], nodes[1], nodes[3]})
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", oldArg, "--max-ttl", "400ms"); r.code != exitOK {
		t.Fatalf("bootstrap: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", oldArg, "--max-ttl", "400ms", "--key", "k", "--ttl", "300ms", "--", "true"); r.code != exitOK {
		t.Fatalf("run with the old settings before: exit %d: %s", r.code, r.stderr)
	}
	r := runCLI(t, "", nil, "reconfigure", "--from-nodes", oldArg, "--from-max-ttl", "400ms", "--nodes", newArg, "--max-ttl", "250ms")
	if r.code != exitOK || !strings.Contains(r.stdout, "reconfigured in") {
		t.Fatalf("reconfigure: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if r.elapsed < 400*time.Millisecond {
		t.Errorf("reconfigure returned after %v, before the hold-off of the old max ttl ended", r.elapsed)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", oldArg, "--max-ttl", "400ms", "--key", "k", "--ttl", "300ms", "--wait", "0", "--", "true"); r.code != 125 {
		t.Errorf("run with the old settings after: exit %d, want 125 (configuration): %s", r.code, r.stderr)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", newArg, "--max-ttl", "250ms", "--key", "k", "--ttl", "200ms", "--", "true"); r.code != exitOK {
		t.Errorf("run with the new settings after: exit %d: %s", r.code, r.stderr)
	}
	// Run again: nothing left to do.
	if r := runCLI(t, "", nil, "reconfigure", "--from-nodes", oldArg, "--from-max-ttl", "400ms", "--nodes", newArg, "--max-ttl", "250ms"); r.code != exitOK {
		t.Errorf("reconfigure again: exit %d: %s", r.code, r.stderr)
	}
}

// Too few old nodes answer: exit 75, and nothing was written (the old
// settings still lock).
func TestReconfigure_TooFewOldNodesIsIncomplete(t *testing.T) {
	nodes := emptyRedisNodes(t, 3)
	arg := nodesArg(nodes)
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg, "--max-ttl", "400ms"); r.code != exitOK {
		t.Fatalf("bootstrap: exit %d: %s", r.code, r.stderr)
	}
	dead := nodesArg(nodes[:1]) + "," + closedAddr(t) + "," + closedAddr(t)
	r := runCLI(t, "", nil, "reconfigure", "--from-nodes", dead, "--from-max-ttl", "400ms", "--nodes", arg, "--max-ttl", "250ms", "--timeout", "1s")
	if r.code != exitIncomplete || !strings.Contains(r.stderr, "nothing was written") {
		t.Fatalf("reconfigure: exit %d, want %d\nstderr: %s", r.code, exitIncomplete, r.stderr)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", arg, "--max-ttl", "400ms", "--key", "k", "--ttl", "300ms", "--", "true"); r.code != exitOK {
		t.Errorf("run with the old settings: exit %d: %s", r.code, r.stderr)
	}
	if r := runCLI(t, "", nil, "reconfigure", "--nodes", arg); r.code != exitUsage {
		t.Errorf("reconfigure without --from-nodes: exit %d, want %d", r.code, exitUsage)
	}
}

// closedAddr is an address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
