package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The parts of Behaviour where something is wrong: a user the nodes
// refuse, a server listed twice, a node killed or frozen.

// An ACL user that may not run the scripts is refused on every node: New
// fails with ErrNodeRefused, which needs the driver's error replies
// (NOPERM) told from transport errors.
func replyErrorRefuses(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	ctx := ctxFor(t, 30*time.Second)
	user := "drivertest-" + script.ByName("acquire").Hash()[:8]
	for _, n := range nodes {
		rc := n.Client(t)
		require.NoError(t, rc.Do(ctx, "acl", "setuser", user, "reset", "on", ">pw", "~*", "&*", "+@connection", "+info").Err())
		t.Cleanup(func() { _ = rc.Do(context.Background(), "acl", "deluser", user).Err() })
	}
	c, err := redlock.NewFromConns(conns(t, dial, nodes, user, "pw"))
	require.ErrorIs(t, err, redlock.ErrNodeRefused)
	var re *redlock.RefusalError
	require.ErrorAs(t, err, &re)
	require.ErrorContains(t, err, "NOPERM")
	require.ErrorContains(t, err, "redlock: NewFromConns: node ", "the error names the constructor called")
	require.Nil(t, c)
}

// aliased is a Conn that names its server by another address, as a
// second DNS name or a proxy would.
type aliased struct {
	driver.Conn
	addr string
}

func (a aliased) Addr() string { return a.addr }

// Two entries that reach one server are refused: by address when they
// name it alike, by the server's identity when they do not.
func sameServerTwice(t *testing.T, dial Dial, nodes []*testenv.RedisNode) {
	list := conns(t, dial, nodes[:3], "", "")
	_, err := redlock.NewFromConns([]driver.Conn{list[0], list[1], list[2], dial(t, nodes[0].Addr(), "", "")})
	require.ErrorContains(t, err, "same address")
	require.ErrorContains(t, err, "redlock: NewFromConns: nodes 0 ")
	_, err = redlock.NewFromConns([]driver.Conn{list[0], list[1], list[2], list[0]})
	require.ErrorContains(t, err, "redlock: NewFromConns: nodes 0 and 3 are the same client")
	_, err = redlock.NewFromConns(nil)
	require.EqualError(t, err, "redlock: NewFromConns: no nodes")
	_, err = redlock.NewFromConns(list[:2], redlock.WithMaxTTL(-time.Second))
	require.ErrorContains(t, err, "redlock: NewFromConns: WithMaxTTL")
	alias := aliased{Conn: dial(t, nodes[0].Addr(), "", ""), addr: "alias.invalid:6379"}
	_, err = redlock.NewFromConns([]driver.Conn{list[0], list[1], list[2], alias})
	var dup *redlock.DuplicateNodeError
	require.ErrorAs(t, err, &dup)
}

// One node killed: a quorum of four grants, extends and releases.
func nodeKilled(t *testing.T, dial Dial) {
	nodes := testenv.RedisNodes(t, 5)
	c := client(t, dial, nodes)
	require.NoError(t, nodes[2].Kill())
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	l, err := c.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err, "Lock with one node killed")
	require.NoError(t, l.Extend(ctx, 5*time.Second))
	require.NoError(t, l.Release(ctx))
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Error(t, ks.Nodes[2].Err, "the killed node answered Inspect")
	require.Equal(t, 4, ks.Answered)
}

// One node frozen (SIGSTOP): the calls return at a majority, without
// waiting for it beyond the node timeout.
func nodeFrozen(t *testing.T, dial Dial) {
	nodes := testenv.RedisNodes(t, 5)
	c := client(t, dial, nodes)
	require.NoError(t, nodes[1].Pause())
	t.Cleanup(func() { _ = nodes[1].Resume() })
	ctx := ctxFor(t, 30*time.Second)
	key := testenv.Key(t)
	for range 3 {
		start := time.Now()
		l, err := c.TryLock(ctx, key, 5*time.Second)
		require.NoError(t, err, "TryLock with one node frozen")
		require.Less(t, time.Since(start), 5*time.Second)
		require.NoError(t, l.Release(ctx))
	}
}
