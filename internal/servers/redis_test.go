package servers_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestRedisProcessStopIsFinalAndCleansUp(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	p, err := servers.StartRedisProcess(context.Background(), servers.RedisConfig{})
	require.NoError(t, err)
	dir := p.Dir()
	require.DirExists(t, dir)
	require.FileExists(t, p.LogPath())

	require.NoError(t, p.Stop())
	require.NoError(t, p.Stop(), "Stop is idempotent")
	require.Zero(t, p.PID())
	require.NoDirExists(t, dir, "Stop removes a directory it created")
	require.Error(t, p.Kill())
	require.Error(t, p.Restart(context.Background()))
}

func TestRedisProcessPortInUse(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	start := time.Now()
	p, err := servers.StartRedisProcess(context.Background(), servers.RedisConfig{Port: port, Dir: t.TempDir()})
	if p != nil {
		_ = p.Stop()
	}
	require.Error(t, err)
	require.Contains(t, err.Error(), "did not come up")
	require.Contains(t, err.Error(), "Address already in use", "the error must carry the log tail")
	require.Less(t, time.Since(start), 10*time.Second, "a dead server must be noticed before the timeout")
}

func TestRedisProcessEnvReachesServer(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	// The dynamic loader reports an LD_PRELOAD it cannot load on stderr, so
	// this shows both that Env reaches the server and that stderr is logged.
	// (Redis rewrites its process title over /proc/PID/environ, so that file
	// cannot be used.)
	p, err := servers.StartRedisProcess(context.Background(), servers.RedisConfig{
		Env: []string{"LD_PRELOAD=quorumlock-testenv-marker.so"},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })
	log, err := os.ReadFile(p.LogPath())
	require.NoError(t, err)
	require.Contains(t, string(log), "quorumlock-testenv-marker.so")
}

// TestRedisProcessRunsTheBinaryAskedFor starts redis-server through a
// wrapper named by RedisConfig.Binary: the wrapper leaves a mark, then
// becomes the server (exec keeps the pid the readiness check expects).
func TestRedisProcessRunsTheBinaryAskedFor(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	real, err := servers.FindBinary("redis-server")
	require.NoError(t, err)
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	wrapper := filepath.Join(dir, "my-redis")
	script := "#!/bin/sh\ntouch '" + mark + "'\nexec '" + real + "' \"$@\"\n"
	require.NoError(t, os.WriteFile(wrapper, []byte(script), 0o755))

	p, err := servers.StartRedisProcess(context.Background(), servers.RedisConfig{Binary: wrapper})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })
	require.FileExists(t, mark, "the server was not started through RedisConfig.Binary")

	missing := filepath.Join(dir, "no-such-redis")
	_, err = servers.StartRedisProcess(context.Background(), servers.RedisConfig{Binary: missing})
	require.ErrorIs(t, err, servers.ErrBinaryNotFound)
	require.Contains(t, err.Error(), missing)
}

// TestRedisProcessPauseReturnsOnceEveryThreadStopped: kill(2) only queues
// SIGSTOP, so Pause waits until the server's threads (redis-server runs
// several) are all stopped, and Resume sets them running again.
func TestRedisProcessPauseReturnsOnceEveryThreadStopped(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "redis-server")
	p, err := servers.StartRedisProcess(context.Background(), servers.RedisConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Stop()) })
	threads, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p.PID()), "task"))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	require.Greater(t, len(threads), 1, "redis-server runs background threads")

	for range 20 {
		require.NoError(t, p.Pause())
		require.Equal(t, len(threads), threadsIn(t, p.PID(), "T"), "every thread is stopped when Pause returns")
		require.NoError(t, p.Resume())
		require.Eventually(t, func() bool { return threadsIn(t, p.PID(), "T") == 0 }, 5*time.Second, time.Millisecond)
	}
}

// threadsIn counts the threads of pid in state.
func threadsIn(t *testing.T, pid int, state string) int {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	n := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		require.NoError(t, err)
		s := string(b)
		if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 0 && f[0] == state {
			n++
		}
	}
	return n
}
