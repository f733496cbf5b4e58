package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// RedisOption configures a node started by Redis or RedisNodes.
type RedisOption interface{ apply(*servers.RedisConfig) }

type redisOptionFunc func(*servers.RedisConfig)

func (f redisOptionFunc) apply(c *servers.RedisConfig) { f(c) }

// WithPersistence sets the node's persistence. Default: PersistenceNone.
func WithPersistence(p Persistence) RedisOption {
	return redisOptionFunc(func(c *servers.RedisConfig) { c.Persistence = p })
}

// WithRedisArgs appends redis-server arguments, which override the defaults.
// Default: none.
func WithRedisArgs(args ...string) RedisOption {
	return redisOptionFunc(func(c *servers.RedisConfig) { c.ExtraArgs = append(c.ExtraArgs, args...) })
}

// WithRedisEnv appends KEY=VALUE entries to the server's environment.
// Default: none.
func WithRedisEnv(env ...string) RedisOption {
	return redisOptionFunc(func(c *servers.RedisConfig) { c.Env = append(c.Env, env...) })
}

// RedisNode is a redis-server owned by one test: stopped, and its directory
// removed, when the test ends. It is a *RedisProcess, or a *RedisContainer
// with QUORUMLOCK_TEST_BACKEND=docker.
type RedisNode struct {
	RedisServer
}

// Redis starts one node on a free port in a directory of the test's own. It
// skips the test if redis-server is missing (fails it in CI) and fails it if
// the node does not come up.
func Redis(t testing.TB, opts ...RedisOption) *RedisNode {
	t.Helper()
	return RedisNodes(t, 1, opts...)[0]
}

// RedisNodes starts n independent nodes in parallel, each with the same
// options, on distinct free ports. It skips or fails like Redis.
func RedisNodes(t testing.TB, n int, opts ...RedisOption) []*RedisNode {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: RedisNodes(%d): need at least one node", n)
	}
	if useDocker(t) {
		if cfgs := redisConfigs(n, opts); cfgs[0].TLS != nil {
			t.Skip("testenv: TLS nodes run only as processes, not with the docker backend")
		}
		return dockerRedisNodes(t, n, opts...)
	}
	RequireBinaries(t, "redis-server")
	cfgs := redisConfigs(n, opts)
	for i := range cfgs {
		cfgs[i].Dir = t.TempDir()
	}
	return startRedisNodes(t, cfgs, func(ctx context.Context, cfg servers.RedisConfig) (RedisServer, error) {
		return servers.StartRedisProcess(ctx, cfg)
	})
}

func redisConfigs(n int, opts []RedisOption) []servers.RedisConfig {
	cfgs := make([]servers.RedisConfig, n)
	for i := range cfgs {
		for _, o := range opts {
			o.apply(&cfgs[i])
		}
	}
	return cfgs
}

// startRedisNodes starts one server per config in parallel, whichever the
// backend, and stops them all at once when the test ends.
func startRedisNodes(t testing.TB, cfgs []servers.RedisConfig, start func(context.Context, servers.RedisConfig) (RedisServer, error)) []*RedisNode {
	t.Helper()
	nodes := make([]*RedisNode, len(cfgs))
	// The first failure cancels the other starts: the test fails anyway,
	// and their timeouts would only delay the report.
	g, ctx := errgroup.WithContext(context.Background())
	for i := range cfgs {
		g.Go(func() error {
			r, err := start(ctx, cfgs[i])
			if err != nil {
				return err
			}
			nodes[i] = &RedisNode{r}
			return nil
		})
	}
	err := g.Wait()
	// Registered before the failure is reported, so the nodes that did
	// come up are stopped even when a sibling did not.
	t.Cleanup(func() {
		up := slices.DeleteFunc(slices.Clone(nodes), func(n *RedisNode) bool { return n == nil })
		if err := servers.StopAll(up); err != nil {
			t.Errorf("testenv: stop redis nodes: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// Client returns a go-redis client with default options except Addr, closed
// when the test ends. Tests that need other options build their own.
func (n *RedisNode) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Clients returns one default client per node, in node order, typed for
// redlock.New.
func Clients(t testing.TB, nodes []*RedisNode) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(nodes))
	for i, n := range nodes {
		out[i] = n.Client(t)
	}
	return out
}

var keySeq atomic.Uint64

// Key returns a key name unique to this call: the test's name, a sequence
// number and a random suffix, so runs with -count or tests sharing a node
// cannot see each other's keys.
func Key(t testing.TB) string {
	t.Helper()
	return "qltest:" + strings.ReplaceAll(t.Name(), " ", "_") + ":" +
		strconv.FormatUint(keySeq.Add(1), 10) + "-" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
