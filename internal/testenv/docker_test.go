package testenv_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// requireDockerBackend skips tests of container behaviour unless the docker
// backend is selected; with it selected, a missing engine fails them.
func requireDockerBackend(t *testing.T) {
	t.Helper()
	backend, err := testenv.SelectedBackend()
	require.NoError(t, err)
	if backend != testenv.BackendDocker {
		t.Skipf("container behaviour: run with %s=%s", testenv.BackendEnv, testenv.BackendDocker)
	}
}

func TestDockerRedisFaults(t *testing.T) {
	requireDockerBackend(t)
	t.Parallel()
	ctx := context.Background()
	node := testenv.Redis(t)
	ctr, ok := node.RedisServer.(*servers.RedisContainer)
	require.True(t, ok, "the docker backend must start containers, got %T", node.RedisServer)
	require.NotEmpty(t, ctr.ContainerID())
	require.Empty(t, node.Dir(), "a container keeps its data inside Docker")

	c := redis.NewClient(&redis.Options{Addr: node.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	key := testenv.Key(t)
	require.NoError(t, c.Set(ctx, key, "v", 0).Err())
	policy, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, "noeviction", policy["maxmemory-policy"])

	// Pause: the port still accepts, requests hang until the deadline.
	require.NoError(t, node.Pause())
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = c.Ping(short).Err()
	cancel()
	require.Error(t, err, "a paused container must not answer")
	require.True(t, isTimeout(err), "want a timeout, got %v", err)
	require.NoError(t, node.Resume())
	require.NoError(t, c.Ping(ctx).Err(), "a resumed container must answer")

	// Kill: nothing answers on the address; a second kill is no error.
	oldPID, addr := node.PID(), node.Addr()
	require.NotZero(t, oldPID)
	require.NoError(t, node.Kill())
	require.Zero(t, node.PID())
	require.False(t, redisAnswers(addr), "a killed container must not answer")
	require.NoError(t, node.Kill())

	// Restart: same address, new process, empty without persistence.
	require.NoError(t, node.Restart(ctx))
	require.Equal(t, addr, node.Addr())
	require.NotEqual(t, oldPID, node.PID())
	require.ErrorIs(t, c.Get(ctx, key).Err(), redis.Nil, "without persistence the node comes back empty")

	// Killing a paused container works, as SIGKILL does on a stopped process.
	require.NoError(t, node.Pause())
	require.NoError(t, node.Kill())
	require.NoError(t, node.Restart(ctx))
	require.NoError(t, c.Ping(ctx).Err())

	require.NoError(t, node.Stop())
	require.NoError(t, node.Stop(), "Stop is idempotent")
	require.Error(t, node.Restart(ctx), "a stopped node stays stopped")
}

// TestDockerRedisPreloadFromHost checks that an LD_PRELOAD library that
// exists only on the host is loaded inside the container: the chaos suite's
// clock-jump shim is built on the host and preloaded this way.
func TestDockerRedisPreloadFromHost(t *testing.T) {
	requireDockerBackend(t)
	t.Parallel()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build a shared library")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "shim.c")
	shim := filepath.Join(dir, "hostonly-shim.so")
	require.NoError(t, os.WriteFile(src, []byte("int quorumlock_shim_marker = 1;\n"), 0o644))
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", shim, src).CombinedOutput()
	require.NoError(t, err, "%s", out)

	node := testenv.Redis(t, testenv.WithRedisEnv("LD_PRELOAD="+shim))
	require.NoError(t, node.Client(t).Ping(context.Background()).Err())
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", node.PID()))
	require.NoError(t, err)
	require.Contains(t, string(maps), shim, "the host's library must be mapped into the server")
}

func redisAnswers(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := io.ReadFull(conn, buf)
	return string(buf[:n]) == "+PONG\r\n"
}
