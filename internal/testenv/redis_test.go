package testenv_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestRedisNodesAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	nodes := testenv.RedisNodes(t, 2)
	require.Len(t, nodes, 2)
	require.NotEqual(t, nodes[0].Addr(), nodes[1].Addr())
	require.NotEqual(t, nodes[0].PID(), nodes[1].PID())

	clients := testenv.Clients(t, nodes)
	key := testenv.Key(t)
	require.NoError(t, clients[0].Set(ctx, key, "v", 0).Err())
	require.Equal(t, "v", clients[0].Get(ctx, key).Val())
	require.ErrorIs(t, clients[1].Get(ctx, key).Err(), redis.Nil, "a write to one node must not reach another")

	policy, err := clients[1].ConfigGet(ctx, "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "noeviction", policy["maxmemory-policy"])
	bind, err := clients[1].ConfigGet(ctx, "bind").Result()
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", bind["bind"])
}

func TestRedisPauseResume(t *testing.T) {
	t.Parallel()
	node := testenv.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: node.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Ping(context.Background()).Err())

	require.NoError(t, node.Pause())
	require.Eventually(t, func() bool { return procState(t, node.PID()) == "T" },
		5*time.Second, 5*time.Millisecond, "SIGSTOP must stop the server")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Ping(ctx).Err()
	require.Error(t, err, "a paused node must not answer")
	require.True(t, isTimeout(err), "want a timeout, got %v", err)
	require.Less(t, time.Since(start), 2*time.Second, "the ctx deadline must bound the call")

	require.NoError(t, node.Resume())
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	require.NoError(t, c.Ping(ctx2).Err(), "a resumed node must answer again")
}

func TestRedisKillRestartWithoutPersistenceLosesData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := testenv.Redis(t)
	c := node.Client(t)
	key := testenv.Key(t)
	require.NoError(t, c.Set(ctx, key, "v", 0).Err())
	oldPID, addr := node.PID(), node.Addr()

	require.NoError(t, node.Kill())
	_, err := net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "a killed node must not accept connections")
	require.NoError(t, node.Kill(), "killing a dead node is not an error")

	require.NoError(t, node.Restart(ctx))
	require.Equal(t, addr, node.Addr(), "a restart keeps the address")
	require.NotEqual(t, oldPID, node.PID())
	require.ErrorIs(t, c.Get(ctx, key).Err(), redis.Nil, "without persistence the node comes back empty")
}

func TestRedisRestartWithAOFAlwaysKeepsData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := testenv.Redis(t, testenv.WithPersistence(testenv.PersistenceAOFAlways))
	c := node.Client(t)
	key := testenv.Key(t)
	require.NoError(t, c.Set(ctx, key, "kept", 0).Err())

	require.NoError(t, node.Kill())
	require.NoError(t, node.Restart(ctx))
	require.Equal(t, "kept", c.Get(ctx, key).Val(), "an acknowledged write must survive SIGKILL with appendfsync always")
}

func TestRedisRestartWhileRunningIsACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	node := testenv.Redis(t)
	c := node.Client(t)
	key := testenv.Key(t)
	require.NoError(t, c.Set(ctx, key, "v", 0).Err())
	require.NoError(t, node.Pause(), "a restart must also work on a paused node")
	require.NoError(t, node.Restart(ctx))
	require.ErrorIs(t, c.Get(ctx, key).Err(), redis.Nil)
}

func TestRedisArgsOverrideDefaults(t *testing.T) {
	t.Parallel()
	node := testenv.Redis(t, testenv.WithRedisArgs("--maxmemory-policy", "allkeys-lru"))
	policy, err := node.Client(t).ConfigGet(context.Background(), "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "allkeys-lru", policy["maxmemory-policy"])
}

func TestKeyIsUniqueAndNamed(t *testing.T) {
	a, b := testenv.Key(t), testenv.Key(t)
	require.NotEqual(t, a, b)
	require.Contains(t, a, t.Name())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
