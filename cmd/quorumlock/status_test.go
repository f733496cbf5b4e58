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
	if r.code != 0 {
		t.Fatalf("status: exit %d, stderr: %s", r.code, r.stderr)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	return &rep, r
}

func TestStatus(t *testing.T) {
	nodes := redisNodes(t, 5)
	key := testenv.Key(t)
	arg := nodesArg(nodes)

	rep, _ := statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Verdict != verdictFree || rep.Reachable != 5 || rep.Quorum != 3 {
		t.Errorf("fresh nodes: verdict %q, %d reachable, quorum %d; want free, 5, 3", rep.Verdict, rep.Reachable, rep.Quorum)
	}
	for _, ns := range rep.Nodes {
		if ns.Admission != admissionNew || ns.Role != "master" || ns.HoldsKey {
			t.Errorf("fresh node %d: admission %q, role %q, holds %v", ns.Node, ns.Admission, ns.Role, ns.HoldsKey)
		}
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
		if ns.Admission != admissionAdmitted {
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
	if r.code != 0 || !strings.Contains(r.stdout, "verdict: HELD") || !strings.Contains(r.stdout, "down") {
		t.Errorf("text status: exit %d\n%s", r.code, r.stdout)
	}

	// Released, with node 0 restarted empty: its peers remember it, so it
	// is in quarantine.
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nodes[0].Restart(ctx); err != nil {
		t.Fatal(err)
	}
	rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key)
	if rep.Nodes[0].Admission != admissionQuarantined {
		t.Errorf("restarted node: admission %q, want quarantined", rep.Nodes[0].Admission)
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
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("password printed:\n%s%s", r.stdout, r.stderr)
	}
}

// TestJudge covers the verdict rules without nodes.
func TestJudge(t *testing.T) {
	up := func(v string, ttl int64) nodeStatus {
		return nodeStatus{Reachable: true, HoldsKey: v != "", Value: v, TTLMS: ttl, Admission: admissionAdmitted}
	}
	down := nodeStatus{Admission: admissionUnknown}
	cases := []struct {
		name    string
		nodes   []nodeStatus
		verdict string
		expires int64
	}{
		{"all free", []nodeStatus{up("", 0), up("", 0), up("", 0), up("", 0), up("", 0)}, verdictFree, 0},
		{"majority", []nodeStatus{up("a", 900), up("a", 500), up("a", 700), up("", 0), down}, verdictHeld, 500},
		{"all hold", []nodeStatus{up("a", 900), up("a", 500), up("a", 700), up("a", 800), up("a", 100)}, verdictHeld, 700},
		{"no expiry", []nodeStatus{up("a", -1), up("a", -1), up("a", 700), up("", 0), up("", 0)}, verdictHeld, 700},
		{"minority leftover", []nodeStatus{up("a", 900), up("a", 500), up("", 0), up("", 0), up("", 0)}, verdictFree, 0},
		{"split", []nodeStatus{up("a", 900), up("a", 500), up("b", 300), up("b", 300), up("", 0)}, verdictFree, 0},
		{"minority plus unreachable", []nodeStatus{up("a", 900), up("a", 500), up("", 0), up("", 0), down}, verdictUnknown, 0},
		{"too few answer", []nodeStatus{up("", 0), up("", 0), down, down, down}, verdictUnknown, 0},
		{"two unreachable, rest free", []nodeStatus{up("", 0), up("", 0), up("", 0), down, down}, verdictFree, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &statusReport{Nodes: tc.nodes, Quorum: 3}
			judge(r)
			if r.Verdict != tc.verdict || r.ExpiresMS != tc.expires {
				t.Errorf("verdict %q, expires %d; want %q, %d (%s)", r.Verdict, r.ExpiresMS, tc.verdict, tc.expires, r.Summary)
			}
		})
	}
}

func TestAdmissionFor(t *testing.T) {
	me := "tcp://127.0.0.1:1"
	peer := func(records ...string) nodeStatus {
		m := map[string]bool{}
		for _, r := range records {
			m[r] = true
		}
		return nodeStatus{Reachable: true, members: m}
	}
	self := nodeStatus{Reachable: true, name: me, members: map[string]bool{}}
	cases := []struct {
		name  string
		nodes []nodeStatus
		want  string
	}{
		{"new", []nodeStatus{self, peer(), peer(), peer(), peer()}, admissionNew},
		{"one peer remembers", []nodeStatus{self, peer(me), peer(), peer(), peer()}, admissionQuarantined},
		{"too few peers answer", []nodeStatus{self, peer(), peer(), {}, {}}, admissionUnknown},
		{"just enough peers", []nodeStatus{self, peer(), peer(), peer(), {}}, admissionNew},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := admissionFor(tc.nodes, 0, 3); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
