package redlock

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// TestJudge covers Inspect's verdict rules without nodes.
func TestJudge(t *testing.T) {
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
func TestInspect(t *testing.T) {
	const maxTTL = 300 * time.Millisecond
	rc := newRealCluster(t, 5)
	var down atomic.Bool // node 3's calls fail while set
	c := rc.client(t, func(i int, sc redis.Scripter) redis.Scripter {
		if i != 3 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(context.Context, string, []string, []any) *redis.Cmd {
			if down.Load() {
				return redis.NewCmdResult(nil, context.DeadlineExceeded)
			}
			return nil
		}}
	}, nil, WithFencing(), WithMaxTTL(maxTTL))
	ctx := context.Background()
	require.NoError(t, c.Bootstrap(ctx))
	l, err := c.TryLock(ctx, "k", maxTTL)
	require.NoError(t, err)
	rc.restartEmpty(t, 4)
	down.Store(true)
	ks, err := c.Inspect(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, l.value, ks.Holder)
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

	down.Store(false)
	_, err = c.TryLock(ctx, "other", maxTTL) // finds node 4 empty: its quarantine starts
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ks, err = c.Inspect(ctx, "k")
		return err == nil && ks.Nodes[4].Admission == AdmissionQuarantined
	}, time.Second, time.Millisecond)
	require.Positive(t, ks.Nodes[4].QuarantineLeft)
	require.LessOrEqual(t, ks.Nodes[4].QuarantineLeft, c.set.quarantine())
	require.Equal(t, c.settings, ks.Nodes[4].Settings)

	_, err = c.Inspect(ctx, "")
	require.Error(t, err)
	_, err = c.Inspect(ctx, "quorumlock:admitted")
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
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	key := testenv.Key(t)

	// A client with another max ttl finds the new deployment and starts a
	// quarantine on every node with its settings.
	other := rc.client(t, nil, nil, WithMaxTTL(30*time.Second))
	_, err := other.TryLock(ctx, key, time.Second)
	require.Error(t, err)
	require.Eventually(t, func() bool {
		for i := range rc.raw {
			if s, _ := rc.raw[i].HGet(ctx, script.PendingKey, "settings").Result(); s != other.settings {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the other client did not start its quarantines")
	require.NoError(t, other.Close())

	// Node 4's quarantine is started over with the inspecting client's
	// settings (as its admission does once it saw peers admitted with them).
	c := rc.client(t, nil, nil, WithMaxTTL(time.Minute))
	require.NotEqual(t, c.settings, other.settings)
	_, err = script.NewNode(rc.raw[4], time.Second).Pending(ctx, script.PendingArgs{ID: newValue(), Settings: c.settings,
		Quarantine: c.set.quarantine(), TTL: c.set.pendingTTL(), Replace: true})
	require.NoError(t, err)

	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	for i := range 4 {
		ns := ks.Nodes[i]
		require.NoError(t, ns.Err)
		require.Equal(t, AdmissionMismatch, ns.Admission, "node %d serves a quarantine under %q, not the client's %q", i, other.settings, c.settings)
		require.Equal(t, other.settings, ns.Settings)
		require.Zero(t, ns.QuarantineLeft)
	}
	require.Equal(t, AdmissionQuarantined, ks.Nodes[4].Admission)
	require.Equal(t, c.settings, ks.Nodes[4].Settings)
	require.Positive(t, ks.Nodes[4].QuarantineLeft)
	require.LessOrEqual(t, ks.Nodes[4].QuarantineLeft, c.set.quarantine())
	require.Equal(t, 5, ks.Answered)
	require.Zero(t, ks.Voting)
}
