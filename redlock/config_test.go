package redlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// New's checks of its nodes and options, and the deployment settings a
// Client must share with the nodes.

func TestNew_RejectsBadConfiguration(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	b := redis.NewClient(&redis.Options{Addr: "localhost:1"})
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:2"}})
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:3"}})
	failover := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:4"}})
	t.Cleanup(func() { a.Close(); b.Close(); cluster.Close(); ring.Close(); failover.Close() })
	tests := []struct {
		name  string
		nodes []redis.UniversalClient
		opts  []Option
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []redis.UniversalClient{a, nil}, nil, "node 1: nil client"},
		{"typed nil node", []redis.UniversalClient{a, (*redis.Client)(nil)}, nil, "node 1: nil *redis.Client"},
		{"cluster client", []redis.UniversalClient{a, cluster}, nil, "independent primaries"},
		{"ring client", []redis.UniversalClient{ring, a}, nil, "independent primaries"},
		{"sentinel failover client", []redis.UniversalClient{failover, a}, nil, "independent primaries"},
		{"max ttl that overflows the quarantine", []redis.UniversalClient{a}, []Option{WithMaxTTL(math.MaxInt64)}, "exceeds 24h0m0s"},
		{"max ttl above a day", []redis.UniversalClient{a}, []Option{WithMaxTTL(MaxMaxTTL + time.Millisecond)}, "exceeds 24h0m0s"},
		{"sub-millisecond max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(time.Second + time.Microsecond)}, "whole number of milliseconds"},
		{"same client twice", []redis.UniversalClient{a, a}, nil, "same client"},
		{"same address twice", []redis.UniversalClient{a, b}, nil, "nodes 0 (127.0.0.1:1) and 1 (localhost:1) are the same address"},
		{"drift factor 1", []redis.UniversalClient{a}, []Option{WithDriftFactor(1)}, "factor"},
		{"negative drift factor", []redis.UniversalClient{a}, []Option{WithDriftFactor(-0.1)}, "factor"},
		{"nil retry", []redis.UniversalClient{a}, []Option{WithRetry(nil, 1)}, "nil delay"},
		{"negative attempts", []redis.UniversalClient{a}, []Option{WithRetry(DefaultRetry, -1)}, "maxAttempts"},
		{"zero node timeout", []redis.UniversalClient{a}, []Option{WithNodeTimeout(0)}, "WithNodeTimeout"},
		{"zero max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(0)}, "WithMaxTTL"},
		{"tiny max ttl", []redis.UniversalClient{a}, []Option{WithMaxTTL(time.Millisecond)}, "no validity"},
		{"nil clock", []redis.UniversalClient{a}, []Option{WithClock(nil)}, "nil clock"},
		{"nil logger", []redis.UniversalClient{a}, []Option{WithLogger(nil)}, "nil logger"},
		{"nil option", []redis.UniversalClient{a}, []Option{nil}, "nil option"},
		{"zero max hold", []redis.UniversalClient{a}, []Option{WithMaxHold(0)}, "WithMaxHold"},
		{"nil quarantine notice", []redis.UniversalClient{a}, []Option{WithQuarantineNotice(nil)}, "WithQuarantineNotice: nil function"},
		{"nil unavailable notice", []redis.UniversalClient{a}, []Option{WithUnavailableNotice(nil)}, "WithUnavailableNotice: nil function"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.nodes, tc.opts...)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, c)
		})
	}
}

// From a review: option errors read "redlock: New: WithMaxTTL: redlock:
// max ttl ..." (the prefix twice) or "drift: factor ..." (no prefix at
// all). Each error of New and CheckTTL carries its package prefix once.
func TestNew_ErrorsCarryOnePrefix(t *testing.T) {
	a := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { a.Close() })
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"max ttl above a day", []Option{WithMaxTTL(48 * time.Hour)}, "WithMaxTTL: max ttl 48h0m0s exceeds 24h0m0s"},
		{"zero max ttl", []Option{WithMaxTTL(0)}, "WithMaxTTL: 0s is not positive"},
		{"drift factor above 1", []Option{WithDriftFactor(1.5)}, "WithDriftFactor: drift: factor must be in [0, 1): got 1.5"},
		{"nil option", []Option{nil}, "nil option"},
		{"zero node timeout", []Option{WithNodeTimeout(0)}, "WithNodeTimeout: 0s is not positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New([]redis.UniversalClient{a}, tc.opts...)
			require.Error(t, err)
			require.True(t, strings.HasPrefix(err.Error(), "redlock: New: "+tc.want), err.Error())
			require.Equal(t, 1, strings.Count(err.Error(), "redlock:"), err.Error())
			err = CheckTTL(time.Second, tc.opts...)
			require.True(t, strings.HasPrefix(err.Error(), "redlock: "+tc.want), err.Error())
			require.Equal(t, 1, strings.Count(err.Error(), "redlock:"), err.Error())
		})
	}
	_, err := New([]redis.UniversalClient{a}, WithDriftFactor(2))
	require.ErrorIs(t, err, drift.ErrFactor)
	_, err = Quarantine(time.Minute, 2)
	require.ErrorIs(t, err, drift.ErrFactor)
	require.Equal(t, 1, strings.Count(err.Error(), "redlock:"), err.Error())
}

// From a review: a max ttl meant as "no limit" must be refused, not turned into a
// quarantine that overflows to nothing.
func TestNew_RefusesAHugeMaxTTL(t *testing.T) {
	cl := newCluster(t, 5)
	ucs := cl.universal()
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 / 2, 300 * 24 * time.Hour} {
		c, err := New(ucs, WithMaxTTL(d))
		require.Error(t, err, "max ttl %v accepted", d)
		require.Nil(t, c)
	}
}

// Nodes must be independent primaries: a replica is refused with a clear
// error, not accepted as a vote that can never grant.
func TestNew_RefusesAReplica(t *testing.T) {
	primary := testenv.Redis(t)
	replica := testenv.Redis(t, testenv.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	other := testenv.RedisNodes(t, 1)[0]
	ucs := []redis.UniversalClient{primary.Client(t), replica.Client(t), other.Client(t)}
	c, err := New(ucs)
	require.ErrorContains(t, err, "is a replica")
	require.ErrorContains(t, err, "independent primaries")
	require.Nil(t, c)
}

// Unreachable nodes do not make New fail (a majority may come up later),
// and a lock over them fails fast with every node's cause.
func TestNew_AcceptsUnreachableNodes(t *testing.T) {
	var nodes []redis.UniversalClient
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody listens on once closed
		require.NoError(t, err)
		addr := l.Addr().String()
		require.NoError(t, l.Close())
		rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		nodes = append(nodes, rc)
	}
	c, err := New(nodes, WithProbeTimeout(200*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	start := time.Now()
	_, err = c.TryLock(context.Background(), "k", time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.Less(t, time.Since(start), 2*time.Second)
	// go-redis retries a refused dial for about 400 ms, longer than the
	// 50 ms per-node timeout: each node shows up as timed out or refused.
	failed := map[int]bool{}
	for _, e := range flatten(err) {
		var ne *NodeError
		var oe *net.OpError
		if errors.As(e, &ne) && (errors.As(ne, &oe) || errors.Is(ne, context.DeadlineExceeded)) {
			failed[ne.Node] = true
		}
	}
	require.Len(t, failed, 5, "want every node's cause in %v", err)
}

// A client built with other settings than the deployment's gets a clear
// error, never a lock, and starts nothing on the nodes.
func TestSettings_OtherSettingsAreRefused(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithMaxTTL(time.Minute))
	ctx := context.Background()
	key := testenv.Key(t)
	for _, opt := range []Option{WithMaxTTL(time.Second), WithDriftFactor(0.02)} {
		other := cl.client(t, opt)
		_, err := other.TryLock(ctx, key, 500*time.Millisecond)
		require.ErrorIs(t, err, ErrConfigMismatch)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, deploymentOf(c), ce.Deployment)
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = other.Lock(lctx, key, 500*time.Millisecond)
		cancel()
		require.ErrorIs(t, err, ErrConfigMismatch, "Lock kept waiting on a configuration error")
		require.NoError(t, other.Close())
	}
	for i := range 5 {
		require.Empty(t, cl.value(t, i, key), "a refused client left its key behind on node %d", i)
	}
}

// The number of nodes is one of a deployment's settings: a deployment
// admitted over 5 nodes must refuse (ErrConfigMismatch) a client built over
// 3 of them, or over the 5 and 2 more, while a client over the same 5 nodes
// in another order is served. Majorities of different node lists need not
// intersect (3 of 5 needs 2 of the 3-node list; 4 of 7 can be the 2 extra
// nodes and 2 others), so two such clients could both hold a key.
//
// Guards against: the settings string (settings.String) leaving out the
// node count, which made the nodes accept such clients.
func TestSettings_NodeCountIsPartOfTheDeployment(t *testing.T) {
	nodes := testenv.RedisNodes(t, 7) // 0..4: the deployment; 5, 6: extra
	const maxTTL, ttl = 2 * time.Second, time.Second
	ctx := context.Background()
	over := func(idx ...int) *Client {
		t.Helper()
		ucs := make([]redis.UniversalClient, len(idx))
		for k, i := range idx {
			ucs[k] = nodes[i].Client(t)
		}
		c, err := New(ucs, WithMaxTTL(maxTTL))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}

	deployment := over(0, 1, 2, 3, 4)
	require.NoError(t, deployment.Bootstrap(ctx))

	for _, tc := range []struct {
		name string
		idx  []int
	}{
		{"subset 3 of 5", []int{0, 1, 2}},
		{"superset 5 plus 2", []int{0, 1, 2, 3, 4, 5, 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			other := over(tc.idx...)
			key := testenv.Key(t)
			l, err := other.TryLock(ctx, key, ttl)
			require.ErrorIs(t, err, ErrConfigMismatch, "a client over %d nodes was served by a deployment of 5", len(tc.idx))
			require.Nil(t, l)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, deploymentOf(deployment), ce.Deployment)
			lctx, cancel := context.WithTimeout(ctx, time.Second)
			_, err = other.Lock(lctx, key, ttl)
			cancel()
			require.ErrorIs(t, err, ErrConfigMismatch, "Lock of a client over %d nodes", len(tc.idx))
		})
	}

	// The same nodes in another order are the same deployment.
	same := over(4, 2, 0, 3, 1)
	l, err := same.TryLock(ctx, testenv.Key(t), ttl)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

// New waits for a majority of the nodes to answer its probe and a short
// grace for the rest, not for the whole probe timeout: a node that does
// not answer is checked when it first does. From a newcomer's review: every
// cron run paid the 1 s probe timeout while one node was down.
func TestNew_ReturnsOnceAMajorityAnswered(t *testing.T) {
	cl := newCluster(t, 5)
	cl.freeze(t, 4)
	const probe = 3 * time.Second
	start := time.Now()
	c, _ := cl.build(t, func(o *redis.Options) { o.ContextTimeoutEnabled = true }, WithProbeTimeout(probe))
	require.Less(t, time.Since(start), probe/2, "New waited out the probe timeout for the frozen node")
	require.True(t, missedLast(c, 4), "the node that did not answer is not waited for until it does")
	require.False(t, missedLast(c, 0))
}

// An even number of nodes tolerates no more failed nodes than one node
// fewer: New says so through the client's logger, once, and only then.
func TestNew_WarnsOfAnEvenNodeCount(t *testing.T) {
	cl := newCluster(t, 4)
	for _, n := range []int{4, 3} {
		var buf bytes.Buffer
		c, err := New(cl.universal()[:n], WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
		require.NoError(t, err)
		require.NoError(t, c.Close())
		warned := strings.Count(buf.String(), "an even number of nodes")
		if n == 4 {
			require.Equal(t, 1, warned, "log: %s", buf.String())
			require.Contains(t, buf.String(), "tolerates=1")
		} else {
			require.Zero(t, warned, "log: %s", buf.String())
		}
	}
}

// The settings Reconfigure reads from the nodes: what String wrote reads
// back, and nothing else does (another layout, a reconfiguration's
// marker, settings New would refuse).
func TestSettings_ParseReadsOnlyWhatStringWrote(t *testing.T) {
	for _, s := range []settings{{5, time.Second, 0.01}, {1, 1500 * time.Millisecond, 0.02}, {3, MaxMaxTTL, 0.001}} {
		got, ok := parseSettings(s.String())
		require.True(t, ok, s.String())
		require.Equal(t, s, got)
	}
	for _, bad := range []string{
		"",
		"v2 nodes=5 maxttl=1000ms drift=0.01",
		"reconfiguring to v1 nodes=5 maxttl=1000ms drift=0.01",
		"retired, reconfigured to v1 nodes=5 maxttl=1000ms drift=0.01",
		"v1 nodes=0 maxttl=1000ms drift=0.01",
		"v1 nodes=5 maxttl=0ms drift=0.01",
		"v1 nodes=5 maxttl=1000ms drift=2",
		"v1 nodes=5 maxttl=1000ms drift=0.010",
		"v1 nodes=5 maxttl=1000ms drift=0.01 ",
		"v1 nodes=5 maxttl=99999999999ms drift=0.01",
	} {
		_, ok := parseSettings(bad)
		require.False(t, ok, "%q", bad)
	}
}
