package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// leastPrivilege is docs/operations.md's least-privilege ACL user, for
// lock keys under the prefix "qltest:" (testenv.Key's).
var leastPrivilege = []string{
	"~qltest:*", "~quorumlock:*", "&quorumlock:*",
	"+evalsha", "+eval",
	"+get", "+set", "+del", "+mget", "+hmget", "+hset", "+pexpire", "+pttl", "+time", "+publish",
	"+zadd", "+zrange", "+zrangebyscore", "+zrem", "+zremrangebyscore", "+zscore",
	"+info", "+subscribe", "+unsubscribe",
}

// A client logged in as the least-privilege user locks, waits for a
// release and releases; extra are the rules the driver needs beyond the
// library's (its connection handshake), which docs/drivers.md lists.
func leastPrivilegeUser(t *testing.T, dial Dial, nodes []*testenv.RedisNode, extra ...string) {
	ctx := ctxFor(t, 30*time.Second)
	user := "drivertest-lp-" + script.ByName("release").Hash()[:8]
	for _, n := range nodes {
		rc := n.Client(t)
		args := []any{"acl", "setuser", user, "reset", "on", ">pw"}
		for _, r := range append(leastPrivilege, extra...) {
			args = append(args, r)
		}
		require.NoError(t, rc.Do(ctx, args...).Err())
		t.Cleanup(func() { _ = rc.Do(context.Background(), "acl", "deluser", user).Err() })
	}
	client(t, dial, nodes) // the deployment bootstrapped, by the default user
	as := func(opts ...redlock.Option) *redlock.Client {
		c, err := redlock.NewFromConns(conns(t, dial, nodes, user, "pw"), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	holder, waiter := as(), as(neverRetry)
	took, l := handOver(t, holder, waiter, nodes, testenv.Key(t))
	require.Less(t, took, 10*time.Second, "the waiter got the key %v after the release: it was not woken", took)
	require.NoError(t, l.Release(ctx))
}
