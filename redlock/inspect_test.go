package redlock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestInspect_VerdictRules covers Inspect's verdict rules without nodes.
func TestInspect_VerdictRules(t *testing.T) {
	up := func(v string, ttl time.Duration) NodeState {
		return NodeState{Value: v, TTL: ttl, Admission: AdmissionAdmitted}
	}
	down := NodeState{Admission: AdmissionUnknown}
	ms := time.Millisecond
	cases := []struct {
		name    string
		nodes   []NodeState
		verdict Verdict
		expires time.Duration
	}{
		{"all free", []NodeState{up("", 0), up("", 0), up("", 0), up("", 0), up("", 0)}, VerdictFree, 0},
		{"majority", []NodeState{up("a", 900*ms), up("a", 500*ms), up("a", 700*ms), up("", 0), down}, VerdictHeld, 500 * ms},
		{"all hold", []NodeState{up("a", 900*ms), up("a", 500*ms), up("a", 700*ms), up("a", 800*ms), up("a", 100*ms)}, VerdictHeld, 700 * ms},
		{"no expiry", []NodeState{up("a", -1), up("a", -1), up("a", 700*ms), up("", 0), up("", 0)}, VerdictHeld, 700 * ms},
		{"no expiry on a majority", []NodeState{up("a", -1), up("a", -1), up("a", -1), up("", 0), up("", 0)}, VerdictHeld, -1},
		{"minority leftover", []NodeState{up("a", 900*ms), up("a", 500*ms), up("", 0), up("", 0), up("", 0)}, VerdictFree, 0},
		{"split", []NodeState{up("a", 900*ms), up("a", 500*ms), up("b", 300*ms), up("b", 300*ms), up("", 0)}, VerdictFree, 0},
		{"minority plus silent", []NodeState{up("a", 900*ms), up("a", 500*ms), up("", 0), up("", 0), down}, VerdictUnknown, 0},
		{"too few answer", []NodeState{up("", 0), up("", 0), down, down, down}, VerdictUnknown, 0},
		{"two silent, rest free", []NodeState{up("", 0), up("", 0), up("", 0), down, down}, VerdictFree, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ks := &KeyState{Nodes: tc.nodes, Quorum: 3}
			ks.judge()
			require.Equal(t, tc.verdict, ks.Verdict, ks.Summary)
			if tc.verdict == VerdictHeld {
				require.Equal(t, tc.expires, ks.ExpiresIn, ks.Summary)
				require.Equal(t, "a", ks.Holder)
			} else {
				require.Empty(t, ks.Holder)
			}
		})
	}
}

// Inspect reads the lock, the fence and the admission state of every node
// without changing anything.
func TestInspect_ReadsEveryNodeWithoutChangingIt(t *testing.T) {
	// Long enough that the lease outlives the steps below, and node 4's
	// quarantine the checks of it, on a loaded machine (300 ms, with its
	// 15 ms node timeout, failed the fencing commit under load).
	const maxTTL = 5 * time.Second
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithFencing(), WithMaxTTL(maxTTL))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, maxTTL)
	require.NoError(t, err)
	f.requireAttempts(t, 1) // every node's acquire is over: no straggler reaches node 4 after its wipe
	cl.wipe(t, 4)
	f.fail(context.DeadlineExceeded, "", 3)
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, valueOf(l), ks.Holder)
	require.Equal(t, 3, ks.Holders)
	require.Equal(t, 4, ks.Answered)
	require.Equal(t, 3, ks.Voting)
	require.Equal(t, l.FencingToken(), ks.MaxFence)
	require.Positive(t, ks.ExpiresIn)
	require.LessOrEqual(t, ks.ExpiresIn, maxTTL)
	require.Equal(t, AdmissionUnknown, ks.Nodes[3].Admission)
	require.Error(t, ks.Nodes[3].Err)
	require.Equal(t, AdmissionUnadmitted, ks.Nodes[4].Admission)
	// TryLock returned once a majority committed the token; which nodes
	// those were is up to timing, so one of them is looked for.
	require.True(t, slices.ContainsFunc(ks.Nodes, func(n NodeState) bool { return n.Fence == l.FencingToken() }),
		"no node reports the committed fence")

	f.heal()
	_, err = c.TryLock(ctx, testenv.Key(t), maxTTL) // finds node 4 empty: its quarantine starts
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ks, err = c.Inspect(ctx, key)
		return err == nil && ks.Nodes[4].Admission == AdmissionQuarantined
	}, time.Second, time.Millisecond)
	require.Positive(t, ks.Nodes[4].QuarantineLeft)
	require.LessOrEqual(t, ks.Nodes[4].QuarantineLeft, quarantineOf(c))
	require.Equal(t, deploymentOf(c), ks.Nodes[4].Settings)

	_, err = c.Inspect(ctx, "")
	require.Error(t, err)
	_, err = c.Inspect(ctx, keyMarker)
	require.Error(t, err)
}

// Inspect reports a node serving a quarantine that was started under other
// settings than the client's as a settings conflict (AdmissionMismatch,
// with those settings), not as an ordinary quarantine: that quarantine
// does not admit the node for this client when it ends, and the operator
// must find the misconfigured client. A quarantine under the client's own
// settings is still reported as one, with the time left.
//
// Guards against: inspectNode reporting every pending mark as
// AdmissionQuarantined, whatever settings it carries.
func TestInspect_QuarantineUnderOtherSettingsIsAConflict(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	key := testenv.Key(t)

	// A client with another max ttl finds the new deployment and starts a
	// quarantine on every node with its settings.
	other := cl.client(t, WithMaxTTL(30*time.Second))
	_, err := other.TryLock(ctx, key, time.Second)
	require.Error(t, err)
	require.Eventually(t, func() bool {
		for i := range cl.raw {
			if s, _ := cl.raw[i].HGet(ctx, keyPending, "settings").Result(); s != deploymentOf(other) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the other client did not start its quarantines")
	require.NoError(t, other.Close())

	// Node 4's quarantine is started over with the inspecting client's
	// settings (as its admission does once it saw peers admitted with them).
	c := cl.client(t, WithMaxTTL(time.Minute))
	require.NotEqual(t, deploymentOf(c), deploymentOf(other))
	startQuarantine(t, cl.raw[4], c)

	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	for i := range 4 {
		ns := ks.Nodes[i]
		require.NoError(t, ns.Err)
		require.Equal(t, AdmissionMismatch, ns.Admission, "node %d serves a quarantine under %q, not the client's %q", i, deploymentOf(other), deploymentOf(c))
		require.Equal(t, deploymentOf(other), ns.Settings)
		require.Zero(t, ns.QuarantineLeft)
	}
	require.Equal(t, AdmissionQuarantined, ks.Nodes[4].Admission)
	require.Equal(t, deploymentOf(c), ks.Nodes[4].Settings)
	require.Positive(t, ks.Nodes[4].QuarantineLeft)
	require.LessOrEqual(t, ks.Nodes[4].QuarantineLeft, quarantineOf(c))
	require.Equal(t, 5, ks.Answered)
	require.Zero(t, ks.Voting)
}
