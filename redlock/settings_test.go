package redlock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

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
			require.Equal(t, deployment.settings, ce.Deployment)
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
