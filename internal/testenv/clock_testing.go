package testenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// NodeClock is a wall clock for one redis-server, offset from true time
// through the clock shim: a node whose clock is skewed, or jumps.
type NodeClock struct {
	t    testing.TB
	lib  string
	file string
}

// SkewedClock builds the clock shim for t (it needs a C compiler: the test
// skips without one, and fails in CI) and returns a clock starting at
// offset. Start a node with its Option; Set moves it later.
func SkewedClock(t testing.TB, offset time.Duration) *NodeClock {
	t.Helper()
	RequireBinaries(t, "gcc")
	dir := t.TempDir()
	// redis-server may run as another user than the test.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testenv: clock dir: %v", err)
	}
	lib, err := servers.BuildClockShim(context.Background(), dir)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	c := &NodeClock{t: t, lib: lib, file: filepath.Join(dir, "offset")}
	c.Set(offset)
	return c
}

// Option starts a node under this clock (local processes only).
func (c *NodeClock) Option() RedisOption {
	return WithRedisEnv(servers.ClockShimEnv(c.lib, c.file)...)
}

// Set moves the clock to offset from true time; the node sees it within a
// few milliseconds.
func (c *NodeClock) Set(offset time.Duration) {
	c.t.Helper()
	if err := servers.WriteClockOffset(c.file, offset); err != nil {
		c.t.Fatalf("testenv: %v", err)
	}
}
