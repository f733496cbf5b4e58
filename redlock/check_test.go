package redlock

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// checkOf runs Check with a 10 s bound and fails t on an error.
func checkOf(t *testing.T, c *Client, keys ...string) *CheckReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := c.Check(ctx, keys...)
	require.NoError(t, err)
	return rep
}

// requireProblem fails t unless node i of rep has a problem of severity s
// whose text contains what, and says the verdict is v.
func requireProblem(t *testing.T, rep *CheckReport, i int, s Severity, what string, v CheckVerdict) {
	t.Helper()
	found := false
	for _, p := range rep.Nodes[i].Problems {
		found = found || p.Severity == s && strings.Contains(p.What, what) && p.Fix != ""
	}
	if !found || rep.Verdict != v {
		t.Fatalf("node %d problems %+v, verdict %q (%s); want a %s problem about %q with a fix, verdict %q",
			i, rep.Nodes[i].Problems, rep.Verdict, rep.Summary, s, what, v)
	}
	for j, n := range rep.Nodes {
		if j != i && !n.Fit() {
			t.Errorf("node %d is not fit: %+v", j, n.Problems)
		}
	}
}

func TestCheck_AWellSetDeploymentIsOKAndNothingIsWritten(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	// On a loaded machine a node's proof can land after New and
	// Bootstrap: Check would then note it (as it should).
	require.Eventually(t, c.ident.allVerified, 10*time.Second, 5*time.Millisecond, "every entry verified")
	before := make([]int64, 5)
	for i, rc := range cl.raw {
		before[i] = rc.DBSize(ctx).Val()
	}
	rep := checkOf(t, c, "app:report")
	require.Equal(t, CheckOK, rep.Verdict, rep.Summary)
	require.Equal(t, 5, rep.Fit)
	for _, n := range rep.Nodes {
		require.Empty(t, n.Problems, "node %d", n.Node)
		require.True(t, n.ConfigRead && n.ClockRead && n.ACLChecked, "node %d read everything: %+v", n.Node, n)
		require.Equal(t, "noeviction", n.Eviction)
		require.Equal(t, "master", n.Server.Role)
		require.Equal(t, AdmissionAdmitted, n.Admission)
		require.Equal(t, cl.value(t, n.Node, script.IdentKey), n.Identity, "node %d: the identity proven", n.Node)
	}
	for i, rc := range cl.raw {
		require.Equal(t, before[i], rc.DBSize(ctx).Val(), "node %d: Check changed the key count", i)
	}
}

// An entry New could not verify (the node was frozen during its probe)
// has no identity in the report and a note that says its votes wait for
// the proof; it stays fit.
func TestCheck_AnEntryNotVerifiedYetIsNoted(t *testing.T) {
	cl := newCluster(t, 3)
	c0, _ := cl.ready(t)
	require.NoError(t, c0.Close())
	cl.freeze(t, 1)
	c := cl.client(t, WithProbeTimeout(200*time.Millisecond))
	cl.thaw(t, 1)
	rep := checkOf(t, c)
	require.Empty(t, rep.Nodes[1].Identity)
	requireProblem(t, rep, 1, SeverityNote, "not verified yet", CheckOK)
	require.NotEmpty(t, rep.Nodes[0].Identity)
}

func TestCheck_AnEvictionPolicyIsUnsafe(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	require.NoError(t, cl.raw[1].ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err())
	requireProblem(t, checkOf(t, c), 1, SeverityUnsafe, "maxmemory-policy is allkeys-lru", CheckUnsafe)
}

func TestCheck_RDBSnapshotsAreUnsafe(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	require.NoError(t, cl.raw[2].ConfigSet(context.Background(), "save", "3600 1").Err())
	requireProblem(t, checkOf(t, c), 2, SeverityUnsafe, "RDB snapshots", CheckUnsafe)
}

func TestCheck_AnAOFSyncedEverySecondIsUnsafe(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	require.NoError(t, cl.raw[3].ConfigSet(ctx, "appendfsync", "everysec").Err())
	require.NoError(t, cl.raw[3].ConfigSet(ctx, "appendonly", "yes").Err())
	requireProblem(t, checkOf(t, c), 3, SeverityUnsafe, "appendfsync everysec", CheckUnsafe)
}

func TestCheck_ANodeWithAReplicaIsUnsafe(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	replica := testenv.Redis(t).Client(t)
	host, port, err := net.SplitHostPort(cl.nodes[0].Addr())
	require.NoError(t, err)
	require.NoError(t, replica.Do(ctx, "REPLICAOF", host, port).Err())
	t.Cleanup(func() { _ = replica.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err() })
	// The primary counts the replica once it has connected.
	require.Eventually(t, func() bool {
		s, err := cl.raw[0].Info(ctx, "replication").Result()
		return err == nil && infoField(s, "connected_slaves") == "1"
	}, 20*time.Second, 10*time.Millisecond, "node 0 never counted its replica")
	requireProblem(t, checkOf(t, c), 0, SeverityUnsafe, "replica", CheckUnsafe)
}

func TestCheck_AMissingACLPermissionIsNamed(t *testing.T) {
	cl := newCluster(t, 5)
	cl.ready(t) // bootstrapped by the default user
	rules := []string{"~app:*", "~quorumlock:*", "&quorumlock:*", "+evalsha", "+eval",
		"+get", "+set", "+del", "+mget", "+hmget", "+hset", "+pexpire", "+pttl", "+time", "+publish",
		"+zadd", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+zscore", "+info", "+subscribe", "+unsubscribe"}
	cl.aclUser(t, "locker", rules...)
	// Node 4's user lacks one command the scripts run.
	require.NoError(t, cl.raw[4].Do(context.Background(), "ACL", "SETUSER", "locker", "-zadd").Err())
	c, err := New(cl.asUser(t, "locker"), withTestNodeTimeout(nil)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	rep := checkOf(t, c, "app:report")
	requireProblem(t, rep, 4, SeverityDegraded, "may not run ZADD quorumlock:check", CheckDegraded)
	require.Equal(t, []string{"ZADD quorumlock:check"}, rep.Nodes[4].Denied)
	for _, n := range rep.Nodes {
		// The user may not run CONFIG GET: a note, not a failure.
		require.False(t, n.ConfigRead, "node %d", n.Node)
	}

	// A lock key outside the user's key patterns is named on every node.
	rep = checkOf(t, c, "other:report")
	require.Equal(t, CheckUnavailable, rep.Verdict, rep.Summary)
	for _, n := range rep.Nodes {
		require.Contains(t, n.Denied, "SET other:report", "node %d", n.Node)
	}
}

func TestCheck_AnAddressThatDoesNotAnswerIsNamed(t *testing.T) {
	cl := newCluster(t, 5)
	cl.ready(t)
	// An entry with a mistyped port: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	typo := ln.Addr().String()
	require.NoError(t, ln.Close())
	ucs := cl.universal()
	bad := redis.NewClient(&redis.Options{Addr: typo, MaxRetries: -1})
	t.Cleanup(func() { _ = bad.Close() })
	ucs[2] = bad
	c, err := New(ucs, withTestNodeTimeout(nil)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	rep := checkOf(t, c)
	requireProblem(t, rep, 2, SeverityDegraded, "did not answer", CheckDegraded)
	require.Contains(t, rep.Nodes[2].Problems[0].What, "connection refused")
	require.Equal(t, 4, rep.Fit)
}

func TestCheck_AClockOneSecondOffIsNamed(t *testing.T) {
	clk := testenv.SkewedClock(t, time.Second)
	nodes := append(testenv.RedisNodes(t, 4), testenv.Redis(t, clk.Option()))
	cl := clusterOf(t, nodes)
	c, _ := cl.ready(t)
	rep := checkOf(t, c)
	requireProblem(t, rep, 4, SeverityDegraded, "clock is", CheckDegraded)
	off := rep.Nodes[4].ClockOffset
	require.InDelta(t, float64(time.Second), float64(off), float64(ClockOffsetBound), "node 4's measured offset %v", off)
}

// TestNew_WarnsOfANodeThatEvicts: New already reads INFO, so an evicting
// node costs no extra command to report, and a service's log names it at
// its start.
func TestNew_WarnsOfANodeThatEvicts(t *testing.T) {
	var log logs
	cl := newCluster(t, 5)
	require.NoError(t, cl.raw[1].ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err())
	cl.client(t, WithLogger(log.logger()))
	warned := log.at(slog.LevelWarn, "maxmemory-policy allkeys-lru")
	require.Len(t, warned, 1, "one warning, for node 1")
	require.Equal(t, int64(1), recordAttrs(warned[0])["node"].Int64())
}

// TestCheck_AFrozenNodeIsNamedWithinTheCallersBound: Check waits for a
// node no longer than its ctx, and reports the node it did not hear from.
func TestCheck_AFrozenNodeIsNamedWithinTheCallersBound(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	cl.freeze(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	rep, err := c.Check(ctx)
	require.NoError(t, err)
	require.Less(t, time.Since(start), 4*time.Second, "Check outlived its ctx")
	requireProblem(t, rep, 1, SeverityDegraded, "did not answer", CheckDegraded)
	require.Equal(t, AdmissionUnknown, rep.Nodes[1].Admission)
}

// TestCheck_ANodeThatRefusesTheCredentialsIsNamed: one node of five with
// another password for the user is degraded, not a reason to report
// nothing.
func TestCheck_ANodeThatRefusesTheCredentialsIsNamed(t *testing.T) {
	cl := newCluster(t, 5)
	cl.ready(t)
	cl.aclUser(t, "locker", "~*", "&*", "+@all")
	require.NoError(t, cl.raw[3].Do(context.Background(), "ACL", "SETUSER", "locker", "resetpass", ">another").Err())
	c, err := New(cl.asUser(t, "locker"), withTestNodeTimeout([]Option{WithoutRefusalCheck()})...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rep := checkOf(t, c)
	requireProblem(t, rep, 3, SeverityDegraded, "refuses this client", CheckDegraded)
	require.ErrorIs(t, rep.Nodes[3].Err, ErrNodeRefused)
}

// TestCheck_AUserWithoutEVALIsNamed: the library's scripts and the ACL
// check are scripts; a user that may not run EVAL is told so (here the
// read of the node's admission is refused first, naming the command).
func TestCheck_AUserWithoutEVALIsNamed(t *testing.T) {
	cl := newCluster(t, 5)
	cl.ready(t)
	cl.aclUser(t, "locker", "~*", "&*", "+@all")
	require.NoError(t, cl.raw[2].Do(context.Background(), "ACL", "SETUSER", "locker", "-eval").Err())
	c, err := New(cl.asUser(t, "locker"), withTestNodeTimeout(nil)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	rep := checkOf(t, c)
	requireProblem(t, rep, 2, SeverityDegraded, "no permissions to run the 'eval' command", CheckDegraded)
	require.ErrorIs(t, rep.Nodes[2].Err, ErrNodeRefused)
}
