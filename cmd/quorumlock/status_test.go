package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

func statusJSON(t *testing.T, env []string, args ...string) (*statusReport, result) {
	t.Helper()
	r := runCLI(t, "", env, append([]string{"status", "--json"}, args...)...)
	if r.code != 0 && r.code != 3 && r.code != 4 && r.code != 5 {
		t.Fatalf("status: exit %d, stderr: %s", r.code, r.stderr)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	// The exit status is the verdict, for scripts: 0 free, 3 held, 4
	// unknown; 5 free while fewer than a majority can vote (a script that
	// asks "is it free?" must not read it as "go ahead").
	want, ok := map[string]int{verdictFree: 0, verdictHeld: 3, verdictUnknown: 4}[rep.Verdict]
	if rep.Verdict == verdictFree && rep.Voting < rep.Quorum {
		want = 5
	}
	if !ok || r.code != want {
		t.Errorf("status with verdict %q and %d of %d voting: exit %d, want %d (known verdict: %v)", rep.Verdict, rep.Voting, rep.Quorum, r.code, want, ok)
	}
	return &rep, r
}

func TestStatus(t *testing.T) {
	nodes := emptyRedisNodes(t, 5)
	key := testenv.Key(t)
	arg := nodesArg(nodes)

	rep, r0 := statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Verdict != verdictFree || rep.Reachable != 5 || rep.Quorum != 3 || rep.Voting != 0 {
		t.Errorf("fresh nodes: verdict %q, %d reachable, quorum %d, voting %d; want free, 5, 3, 0", rep.Verdict, rep.Reachable, rep.Quorum, rep.Voting)
	}
	if r0.code != exitNoVote {
		t.Errorf("fresh nodes (none admitted): exit %d, want %d: free, but no lock can be taken", r0.code, exitNoVote)
	}
	for _, ns := range rep.Nodes {
		if ns.Admission != string(redlock.AdmissionUnadmitted) || ns.Role != "master" || ns.HoldsKey {
			t.Errorf("fresh node %d: admission %q, role %q, holds %v", ns.Node, ns.Admission, ns.Role, ns.HoldsKey)
		}
	}
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg); r.code != 0 || !strings.Contains(r.stdout, "admitted 5 nodes") {
		t.Fatalf("bootstrap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "", nil, "bootstrap", "--nodes", arg, "--max-ttl", "10s"); r.code != exitFailure || !strings.Contains(r.stderr, "disagree") && !strings.Contains(r.stderr, "but this client has") {
		t.Errorf("bootstrap with other settings: exit %d, stderr %s", r.code, r.stderr)
	}

	client, err := redlock.New(testenv.Clients(t, nodes), redlock.WithFencing())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	lease, err := client.TryLock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Verdict != verdictHeld || rep.Holders < 3 || rep.Holder == "" {
		t.Fatalf("held: verdict %q, holders %d, holder %q", rep.Verdict, rep.Holders, rep.Holder)
	}
	if rep.ExpiresMS <= 0 || rep.ExpiresMS > 30_000 {
		t.Errorf("held: expires in %d ms, want in (0, 30000]", rep.ExpiresMS)
	}
	if rep.MaxFence != lease.FencingToken() {
		t.Errorf("highest fence %d, lease token %d", rep.MaxFence, lease.FencingToken())
	}
	withFence := 0
	for _, ns := range rep.Nodes {
		if ns.Fence == lease.FencingToken() {
			withFence++
		}
		if ns.Admission != string(redlock.AdmissionAdmitted) {
			t.Errorf("node %d: admission %q after a lock, want admitted", ns.Node, ns.Admission)
		}
	}
	if withFence < 3 {
		t.Errorf("%d nodes carry the token, want a majority", withFence)
	}

	// One node down, one frozen: reported, not fatal, and still bounded.
	if err := nodes[4].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[3].Pause(); err != nil {
		t.Fatal(err)
	}
	rep, r := statusJSON(t, nil, "--nodes", arg, "--key", key, "--timeout", "1s")
	if r.elapsed > 10*time.Second {
		t.Errorf("status with a frozen node took %v, --timeout 1s", r.elapsed)
	}
	if rep.Nodes[4].Reachable || rep.Nodes[4].Error == "" || rep.Nodes[3].Reachable {
		t.Errorf("dead/frozen nodes: %+v / %+v", rep.Nodes[4], rep.Nodes[3])
	}
	if rep.Verdict != verdictHeld || rep.Reachable != 3 {
		t.Errorf("with 2 of 5 down: verdict %q, reachable %d; want held, 3", rep.Verdict, rep.Reachable)
	}
	if err := nodes[3].Resume(); err != nil {
		t.Fatal(err)
	}

	// The text form says the same in words.
	r = runCLI(t, "", nil, "status", "--nodes", arg, "--key", key)
	if r.code != 3 || !strings.Contains(r.stdout, "verdict: HELD") || !strings.Contains(r.stdout, "down") {
		t.Errorf("text status: exit %d\n%s", r.code, r.stdout)
	}

	// Released, with node 0 restarted empty: unadmitted until a client
	// finds it, then in quarantine.
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Nodes[0].Admission != string(redlock.AdmissionUnadmitted) {
		t.Errorf("restarted node before any client: admission %q, want unadmitted", rep.Nodes[0].Admission)
	}
	if _, err := client.TryLock(ctx, "other-"+key, time.Second); err != nil {
		t.Fatal(err) // nodes 1-3 are enough; the attempt starts node 0's quarantine
	}
	// The attempt did not need node 0; its admission starts in the background.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key); rep.Nodes[0].Admission != string(redlock.AdmissionUnadmitted) {
			break
		}
	}
	if rep.Nodes[0].Admission != string(redlock.AdmissionQuarantined) || rep.Nodes[0].QuarantineLeft <= 0 {
		t.Errorf("restarted node: admission %q, %d ms left, want quarantined", rep.Nodes[0].Admission, rep.Nodes[0].QuarantineLeft)
	}
	if rep.Verdict != verdictFree {
		t.Errorf("released: verdict %q (%s), want free", rep.Verdict, rep.Summary)
	}
	if rep.Voting != 3 {
		t.Errorf("voting %d, want 3 (one dead, one quarantined)", rep.Voting)
	}
	r = runCLI(t, "", nil, "status", "--nodes", arg, "--key", key)
	if !strings.Contains(r.stdout, "quarantined") || !strings.Contains(r.stdout, "lost its data") {
		t.Errorf("text status does not report the quarantine:\n%s", r.stdout)
	}

	// Three down: nobody can tell.
	for _, n := range nodes[1:3] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Verdict != verdictUnknown {
		t.Errorf("3 of 5 down: verdict %q, want unknown", rep.Verdict)
	}
	if r := runCLI(t, "", nil, "status", "--nodes", arg, "--key", key); r.code != 4 || !strings.Contains(r.stdout, "UNKNOWN") {
		t.Errorf("text status, 3 of 5 down: exit %d, want 4\n%s", r.code, r.stdout)
	}
}

func TestStatusPassword(t *testing.T) {
	const secret = "quorumlock-status-pw-93a0"
	nodes := redisNodes(t, 3)
	setPassword(t, nodes, secret)
	key := testenv.Key(t)
	rep, r := statusJSON(t, []string{"QUORUMLOCK_PASSWORD=" + secret}, "--nodes", nodesArg(nodes), "--key", key)
	if rep.Reachable != 3 || rep.Verdict != verdictFree {
		t.Errorf("right password: %d reachable, verdict %q\n%s", rep.Reachable, rep.Verdict, r.stdout)
	}
	rep, r = statusJSON(t, []string{"QUORUMLOCK_PASSWORD=not-" + secret}, "--nodes", nodesArg(nodes), "--key", key)
	if rep.Reachable != 0 || rep.Nodes[0].Error == "" {
		t.Errorf("wrong password: %d reachable, error %q", rep.Reachable, rep.Nodes[0].Error)
	}
	// Refused, with the node's own reply (it was "down" and "unexpected
	// type=<nil> for Slice").
	for _, ns := range rep.Nodes {
		if !ns.Answered || !strings.Contains(ns.Error, "WRONGPASS") {
			t.Errorf("wrong password: node %d answered %v, error %q", ns.Node, ns.Answered, ns.Error)
		}
	}
	r = runCLI(t, "", []string{"QUORUMLOCK_PASSWORD=not-" + secret}, "status", "--nodes", nodesArg(nodes), "--key", key)
	refused := 0
	for line := range strings.Lines(r.stdout) {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "refused" {
			refused++
		}
	}
	if r.code != exitUnknown || refused != 3 || strings.Contains(r.stdout, "unexpected type") {
		t.Errorf("wrong password, text: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("password printed:\n%s%s", r.stdout, r.stderr)
	}
}
