package testenv

import (
	"context"
	"testing"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// useDocker reports whether the test layer runs containers; an unknown
// QUORUMLOCK_TEST_BACKEND fails the test.
func useDocker(t testing.TB) bool {
	t.Helper()
	backend, err := SelectedBackend()
	if err != nil {
		t.Fatal(err)
	}
	return backend == BackendDocker
}

// dockerRedisNodes is RedisNodes on the docker backend. A missing engine or
// image fails the test even outside CI: whoever set
// QUORUMLOCK_TEST_BACKEND=docker asked for containers, and a skip would hide
// that none ran.
func dockerRedisNodes(t testing.TB, n int, opts ...RedisOption) []*RedisNode {
	t.Helper()
	return startRedisNodes(t, redisConfigs(n, opts), func(ctx context.Context, cfg servers.RedisConfig) (RedisServer, error) {
		return servers.StartRedisContainer(ctx, cfg)
	})
}
