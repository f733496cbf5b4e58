package main

import (
	"context"
	"maps"
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
	// No --from-max-ttl: the old settings are read from the old nodes, and
	// the downtime printed is their quarantine (400ms + 1% + 2ms).
	r := runCLI(t, "", nil, "reconfigure", "--from-nodes", oldArg, "--nodes", newArg, "--max-ttl", "250ms")
	if r.code != exitOK || !strings.Contains(r.stdout, "reconfigured in") {
		t.Fatalf("reconfigure: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "(v1 nodes=3 maxttl=400ms drift=0.01) to 3 nodes (v1 nodes=3 maxttl=250ms drift=0.01): no lock for about 406ms") {
		t.Errorf("reconfigure did not print the settings it read and the downtime:\n%s", r.stdout)
	}
	if r.elapsed < 400*time.Millisecond {
		t.Errorf("reconfigure returned after %v, before the hold-off of the old max ttl ended", r.elapsed)
	}
	marked := strings.Index(r.stdout, "start the clients of the new settings now")
	if marked < 0 || marked > strings.Index(r.stdout, "reconfigured in") {
		t.Errorf("reconfigure did not say when to start the new clients before it ended:\n%s", r.stdout)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", oldArg, "--max-ttl", "400ms", "--key", "k", "--ttl", "300ms", "--wait", "0", "--", "true"); r.code != 125 {
		t.Errorf("run with the old settings after: exit %d, want 125 (configuration): %s", r.code, r.stderr)
	}
	if r := runCLI(t, "", nil, "run", "--nodes", newArg, "--max-ttl", "250ms", "--key", "k", "--ttl", "200ms", "--", "true"); r.code != exitOK {
		t.Errorf("run with the new settings after: exit %d: %s", r.code, r.stderr)
	}
	// status with the old settings says which node left the list.
	st := runCLI(t, "", nil, "status", "--nodes", oldArg, "--max-ttl", "400ms", "--key", "k")
	if want := "node 2 (" + nodes[2].Addr() + ") was retired by a reconfiguration"; !strings.Contains(st.stdout, want) {
		t.Errorf("status with the old settings does not say %q:\n%s%s", want, st.stdout, st.stderr)
	}
	// Run again, with the old settings read or typed: already done.
	for _, from := range [][]string{nil, {"--from-max-ttl", "400ms"}} {
		args := append([]string{"reconfigure", "--from-nodes", oldArg, "--nodes", newArg, "--max-ttl", "250ms"}, from...)
		r := runCLI(t, "", nil, args...)
		if r.code != exitOK || !strings.HasPrefix(r.stdout, "already done:") || strings.Contains(r.stdout, "reconfigured in") {
			t.Errorf("reconfigure again %v: exit %d\nstdout: %s\nstderr: %s", from, r.code, r.stdout, r.stderr)
		}
	}
}

// While a change holds the new nodes off, status with the new settings
// says "reconfiguration hold-off" and the time left, not "mismatch", and
// status with the old settings says the nodes are being reconfigured.
func TestReconfigure_StatusShowsTheHoldOff(t *testing.T) {
	nodes := emptyRedisNodes(t, 3)
	arg := nodesArg(nodes)
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg, "--max-ttl", "5s"); r.code != exitOK {
		t.Fatalf("bootstrap: exit %d: %s", r.code, r.stderr)
	}
	cmd := startCLI(t, "", nil, "reconfigure", "--from-nodes", arg, "--nodes", arg, "--max-ttl", "4s")
	// reconfigure writes the hold-off node by node, so a status read
	// while it writes sees some nodes in their hold-off and the others
	// still under the old settings ("mismatch"): wait for a read after
	// every node has it.
	var seen result
	holdOff := func(r result) bool {
		return strings.Contains(r.stdout, "reconfiguring (hold-off, ") && strings.Contains(r.stdout, "reconfiguration hold-off, ") && !strings.Contains(r.stdout, "mismatch")
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		seen = runCLI(t, "", nil, "status", "--nodes", arg, "--max-ttl", "4s", "--key", "k")
		if holdOff(seen) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !holdOff(seen) {
		t.Errorf("status with the new settings during the hold-off:\n%s%s", seen.stdout, seen.stderr)
	}
	old := runCLI(t, "", nil, "status", "--nodes", arg, "--max-ttl", "5s", "--key", "k")
	if !strings.Contains(old.stdout, "is being reconfigured to the settings \"v1 nodes=3 maxttl=4000ms drift=0.01\"") {
		t.Errorf("status with the old settings during the change:\n%s%s", old.stdout, old.stderr)
	}
	if r := cmd.wait(t); r.code != exitOK {
		t.Errorf("reconfigure: exit %d: %s", r.code, r.stderr)
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

// Bad flags are a usage error (exit 2) that names the flag, and no node is
// touched: the nodes' data is byte for byte what it was.
func TestReconfigure_BadFlagsTouchNoNode(t *testing.T) {
	nodes := emptyRedisNodes(t, 4)
	oldArg, newArg := nodesArg(nodes[:3]), nodesArg([]*testenv.RedisNode{nodes[0], nodes[1], nodes[3]})
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", oldArg, "--max-ttl", "400ms"); r.code != exitOK {
		t.Fatalf("bootstrap: exit %d: %s", r.code, r.stderr)
	}
	before := dataOf(t, nodes)
	good := []string{"--from-nodes", oldArg, "--from-max-ttl", "400ms", "--nodes", newArg, "--max-ttl", "250ms"}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--timeout", "0"}, "--timeout must be positive"},
		{[]string{"--from-max-ttl", "1500us"}, "--from-max-ttl"},
		{[]string{"--from-max-ttl", "0"}, "must be positive"},
		{[]string{"--max-ttl", "25h"}, "--max-ttl"},
		{[]string{"--max-ttl", "abc"}, "max-ttl"},
		{[]string{"--drift", "1"}, "--drift"},
		{[]string{"--from-drift", "-0.1"}, "--from-drift"},
		{[]string{"--from-nodes", ""}, "--from-nodes"},
		{[]string{"--from-nodes", "127.0.0.1"}, "--from-nodes"},
		{[]string{"--from-nodes", nodes[0].Addr() + "," + nodes[0].Addr()}, "the same address"},
		{[]string{"--nodes", "127.0.0.1"}, "host:port"},
	} {
		args := append(append([]string{"reconfigure"}, good...), tc.args...)
		r := runCLI(t, "", nil, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("reconfigure %v: exit %d, want %d saying %q\nstderr: %s", tc.args, r.code, exitUsage, tc.says, r.stderr)
		}
		if after := dataOf(t, nodes); !maps.Equal(before, after) {
			t.Fatalf("reconfigure %v wrote to the nodes:\nbefore %q\nafter  %q", tc.args, before, after)
		}
	}
	// The flags were right: the same command, with nothing wrong, moves it.
	if r := runCLI(t, "", nil, append([]string{"reconfigure"}, good...)...); r.code != exitOK {
		t.Fatalf("reconfigure with good flags: exit %d: %s", r.code, r.stderr)
	}
	if after := dataOf(t, nodes); maps.Equal(before, after) {
		t.Fatalf("reconfigure with good flags wrote nothing: %q", after)
	}
}

// dataOf returns every key of every node with its DUMP, as node/key.
func dataOf(t *testing.T, nodes []*testenv.RedisNode) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out := map[string]string{}
	for _, n := range nodes {
		c := n.Client(t)
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			v, err := c.Dump(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			out[n.Addr()+"/"+k] = v
		}
	}
	return out
}
