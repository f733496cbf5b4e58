package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// aliasedCluster starts five nodes; node 0 also listens on the returned
// Unix socket, a second name for it.
func aliasedCluster(t *testing.T) (*cluster, string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "node0.sock")
	nodes := []*testenv.RedisNode{testenv.Redis(t, testenv.WithRedisArgs("--unixsocket", sock, "--unixsocketperm", "777"))}
	nodes = append(nodes, testenv.RedisNodes(t, 4)...)
	return clusterOf(t, nodes), sock
}

// listedTwice builds a client of cl that lists node 0 twice, by its Unix
// socket sock and by TCP, then nodes 1-3; it is built while node 0 cannot
// answer the startup probe, which would refuse the list at once.
func (cl *cluster) listedTwice(t *testing.T, sock string, opts ...Option) *Client {
	t.Helper()
	require.NoError(t, cl.nodes[0].Pause())
	list := []redis.UniversalClient{redis.NewClient(&redis.Options{Network: "unix", Addr: sock})}
	for i := range 4 {
		list = append(list, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr()}))
	}
	for _, uc := range list {
		t.Cleanup(func() { _ = uc.Close() })
	}
	c, err := New(list, append(opts, WithProbeTimeout(300*time.Millisecond))...)
	require.NoError(t, cl.nodes[0].Resume())
	require.NoError(t, err, "New cannot tell: node 0 did not answer")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// One server, one vote (docs/protocol.md). From a red-team review: a client
// whose node list named one server twice, and that could not reach it when
// it started, later counted it as two of five votes and got a lease while
// another client validly held the key.
func TestIdentity_AServerListedTwiceNeverCountsTwice(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := context.Background()
	cl, sock := aliasedCluster(t)
	good := cl.client(t, WithMaxTTL(ttl))
	require.NoError(t, good.Bootstrap(ctx))

	// The misconfigured client: node 0 by its socket and by TCP, nodes 1-3.
	bad := cl.listedTwice(t, sock, WithMaxTTL(ttl))

	// The first lease: nodes 2, 3 and 4 (nodes 0 and 1 busy for a moment).
	key := testenv.Key(t)
	cl.hold(t, key, 300*time.Millisecond, 0, 1)
	first, err := good.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Release(ctx) })
	require.Eventually(t, func() bool { return cl.value(t, 0, key) == "" && cl.value(t, 1, key) == "" },
		2*time.Second, 10*time.Millisecond)

	for range 3 {
		_, err = bad.TryLock(ctx, key, ttl)
		require.Error(t, err)
		if err != nil && !time.Now().Before(first.Deadline()) {
			t.Fatal("the first lease ended before the check: it proves nothing")
		}
	}
	require.ErrorIs(t, err, ErrConfigMismatch)
	var dup *DuplicateNodeError
	require.ErrorAs(t, err, &dup)
	require.Equal(t, [2]int{0, 1}, [2]int{dup.Node, dup.Other})
	require.Contains(t, err.Error(), "same Redis server")
	// For good: Lock says so at once too.
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = bad.Lock(lctx, key, ttl)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.NoError(t, lctx.Err(), "Lock waited on a configuration error")
}

// New refuses a list that names one server twice when both answer.
func TestIdentity_NewRefusesAServerListedTwice(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "n.sock")
	nodes := testenv.RedisNodes(t, 3)
	extra := testenv.Redis(t, testenv.WithRedisArgs("--unixsocket", sock, "--unixsocketperm", "777"))
	list := []redis.UniversalClient{redis.NewClient(&redis.Options{Network: "unix", Addr: sock}),
		redis.NewClient(&redis.Options{Addr: extra.Addr()})}
	for _, nd := range nodes {
		list = append(list, redis.NewClient(&redis.Options{Addr: nd.Addr()}))
	}
	for _, uc := range list {
		t.Cleanup(func() { _ = uc.Close() })
	}
	_, err := New(list)
	require.ErrorContains(t, err, "same Redis server")
}

func TestIdentity_NewRefusesTheSameServerUnderAnotherName(t *testing.T) {
	node := testenv.Redis(t)
	a := node.Client(t)
	// A second client that reaches the same server under another name.
	b := redis.NewClient(&redis.Options{
		Addr: "alias.invalid:6379",
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, node.Addr())
		},
	})
	t.Cleanup(func() { _ = b.Close() })
	c, err := New([]redis.UniversalClient{a, b})
	require.ErrorContains(t, err, "same Redis server")
	require.Nil(t, c)
}

// aliasedClient is a Client whose list names node 0 twice (entries 0 and
// 1: its socket and its TCP address) beside nodes 1-3, built while node 0
// is frozen, so that neither of node 0's names is verified; its node
// clients carry a faults hook.
func aliasedClient(t *testing.T, cl *cluster, sock string, opts ...Option) (*Client, *faults) {
	t.Helper()
	f := &faults{n: 5, calls: map[scriptAt]int64{}}
	require.NoError(t, cl.nodes[0].Pause())
	list := []redis.UniversalClient{redis.NewClient(&redis.Options{Network: "unix", Addr: sock})}
	for i := range 4 {
		list = append(list, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr()}))
	}
	for i, uc := range list {
		uc.AddHook(nodeHook{f: f, node: i})
		t.Cleanup(func() { _ = uc.Close() })
	}
	c, err := New(list, append(opts, WithProbeTimeout(300*time.Millisecond))...)
	require.NoError(t, cl.nodes[0].Resume())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(f.releaseAll)
	require.False(t, verifiedOn(c, 0) || verifiedOn(c, 1), "node 0's names answered New's probe")
	return c, f
}

// A fence commit counts only verified entries: with the commit failing on
// two of the three distinct servers that granted, node 0's two names must
// not make up the majority of commits the token needs.
func TestIdentity_AFenceCommitDoesNotCountAServerTwice(t *testing.T) {
	const ttl = 5 * time.Second
	ctx := context.Background()
	cl, sock := aliasedCluster(t)
	require.NoError(t, cl.client(t, WithMaxTTL(ttl)).Bootstrap(ctx))
	c, f := aliasedClient(t, cl, sock, WithMaxTTL(ttl), WithFencing(), WithRetry(DefaultRetry, 1))
	f.fail(errors.New("commit lost"), "commit", 3, 4)
	l, err := c.TryLock(ctx, testenv.Key(t), ttl)
	require.Error(t, err, "node 0's two names made up a majority of fence commits (token %d)", tokenOrZero(l))
	require.Positive(t, f.count("commit", 0)+f.count("commit", 1), "node 0 was never sent a commit: the test proves nothing")
}

// A hand-off counts only verified entries: a release that hands the key
// to a waiter on node 0 and node 1 (and on no other node: another owner
// holds nodes 2-4) must not become a lease because node 0 is listed twice.
func TestIdentity_AHandOffDoesNotCountAServerTwice(t *testing.T) {
	const ttl = 5 * time.Second
	ctx := context.Background()
	cl, sock := aliasedCluster(t)
	good := cl.client(t, WithMaxTTL(ttl))
	require.NoError(t, good.Bootstrap(ctx))
	bad, f := aliasedClient(t, cl, sock, WithMaxTTL(ttl), WithKeyHandOff(), slowRetry)
	// The identity proofs a failed attempt asks for verify nothing while
	// a verified entry is silent to them (node 3, entry 4), and find no
	// duplicate while one of node 0's names is (entry 1): node 0's names
	// stay unverified and the waiter stays in line.
	f.fail(errors.New("ident lost"), "ident", 1, 4)

	key := testenv.Key(t)
	lg, err := good.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cl.value(t, 4, key) != "" }, 2*time.Second, 5*time.Millisecond)
	got := make(chan error, 1)
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() {
		l, err := bad.Lock(lctx, key, ttl)
		if err == nil {
			err = fmt.Errorf("DOUBLE GRANT: a lease from node 0's two names and node 1 (token %d)", tokenOrZero(l))
			_ = l.Release(ctx)
		} else {
			err = nil
		}
		got <- err
	}()
	cl.requireLineLen(t, key, 1, "the waiter never joined the line", 0, 1)
	// Another owner takes nodes 2-4 (a majority of the deployment's five
	// servers) from the first holder; then the first holder releases,
	// which hands the key to the waiter on nodes 0 and 1 only.
	cl.takeOver(t, key, ttl, 2, 3, 4)
	require.ErrorIs(t, lg.Release(ctx), ErrNotHeld, "the first holder still held nodes 2-4")
	handed := assert.Eventually(t, func() bool { return handedTo(cl.value(t, 0, key)) && handedTo(cl.value(t, 1, key)) },
		time.Second, 2*time.Millisecond, "the release did not hand nodes 0 and 1 to the waiter: the test proves nothing")
	require.NoError(t, <-got)
	require.True(t, handed)
	require.False(t, verifiedOn(bad, 0) || verifiedOn(bad, 1), "node 0's names were verified: the test proves nothing")
}

// tokenOrZero is l's fencing token, 0 for no lease.
func tokenOrZero(l *Lease) uint64 {
	if l == nil {
		return 0
	}
	return l.FencingToken()
}

// An extend counts only verified entries: a client whose list names node 0
// twice (neither name verified: node 0 was frozen when it started) holds a
// lease on nodes 1-3; once nodes 2 and 3 are taken over, node 0's two
// names must not renew it as two votes beside node 1's.
func TestIdentity_AnExtendDoesNotCountAServerTwice(t *testing.T) {
	const ttl = 5 * time.Second
	ctx := context.Background()
	cl, sock := aliasedCluster(t)
	require.NoError(t, cl.client(t, WithMaxTTL(ttl)).Bootstrap(ctx))
	c := cl.listedTwice(t, sock, WithMaxTTL(ttl))
	require.False(t, verifiedOn(c, 0) || verifiedOn(c, 1), "node 0's names answered New's probe")

	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err, "nodes 1-3 are three distinct servers")
	require.Eventually(t, func() bool { return cl.value(t, 0, key) != "" }, 2*time.Second, 5*time.Millisecond,
		"the acquire never reached node 0")
	require.False(t, verifiedOn(c, 0) || verifiedOn(c, 1), "a won attempt verified node 0's names")
	cl.takeOver(t, key, ttl, 2, 3)
	before := l.Deadline()
	err = l.Extend(ctx, ttl)
	require.Error(t, err, "node 0's two names renewed the lease as two votes beside node 1's")
	require.Equal(t, before, l.Deadline(), "a failed extend moved the deadline")
}

// An entry that was down when New ran is verified soon after it first
// answers, not only once an attempt fails for want of its vote: by then a
// verified entry may be down, and a proof waits for every verified entry
// (one that does not answer may be this one under another name), so no
// lock could be had with four of five servers up. Here nodes 0 and 1 are
// frozen at New, answer the attempts after they thaw (late: they missed
// the probe, so the attempts do not wait for them), and node 2 freezes
// later.
func TestIdentity_AnEntryDownAtNewIsVerifiedWhenItFirstAnswers(t *testing.T) {
	const ttl = 5 * time.Second
	ctx := context.Background()
	cl := newCluster(t, 5)
	require.NoError(t, cl.client(t, WithMaxTTL(ttl)).Bootstrap(ctx))
	cl.freeze(t, 0, 1)
	var list []redis.UniversalClient
	for i := range 5 {
		uc := redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr()})
		t.Cleanup(func() { _ = uc.Close() })
		list = append(list, uc)
	}
	c, err := New(list, WithMaxTTL(ttl), WithProbeTimeout(300*time.Millisecond))
	cl.thaw(t, 0, 1)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.False(t, verifiedOn(c, 0) || verifiedOn(c, 1), "nodes 0 and 1 answered New's probe: the test proves nothing")

	l, err := c.TryLock(ctx, testenv.Key(t), ttl)
	require.NoError(t, err, "nodes 2-4 are verified")
	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool { return verifiedOn(c, 0) && verifiedOn(c, 1) }, 3*time.Second, 5*time.Millisecond,
		"nodes 0 and 1 answered and were never verified")

	cl.freeze(t, 2)
	l, err = c.TryLock(ctx, testenv.Key(t), ttl)
	require.NoError(t, err, "four of five servers are up")
	require.NoError(t, l.Release(ctx))
	cl.thaw(t, 2)
}

// proxiedClient builds a Client over cl whose entry 0 is a switchProxy
// in front of node 0 (entries 1 and 2 are nodes 1 and 2), with every
// entry verified by New, and returns its node clients.
func proxiedClient(t *testing.T, cl *cluster, opts ...Option) (*Client, *switchProxy, []redis.UniversalClient) {
	t.Helper()
	px := newSwitchProxy(t, cl.nodes[0].Addr())
	list := []redis.UniversalClient{redis.NewClient(&redis.Options{Addr: px.Addr()})}
	for i := 1; i < len(cl.nodes); i++ {
		list = append(list, redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr()}))
	}
	for _, uc := range list {
		t.Cleanup(func() { _ = uc.Close() })
	}
	c, err := New(list, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for i := range list {
		require.True(t, verifiedOn(c, i), "New did not verify node %d", i)
	}
	return c, px, list
}

// repointTo re-points px to cl's node i and waits until the entry's node
// client uc reaches it.
func repointTo(t *testing.T, cl *cluster, px *switchProxy, uc redis.UniversalClient, i int) {
	t.Helper()
	px.repoint(cl.nodes[i].Addr())
	id := cl.value(t, i, keyIdent)
	require.NotEmpty(t, id)
	require.Eventually(t, func() bool { return uc.Get(context.Background(), keyIdent).Val() == id }, 2*time.Second, 10*time.Millisecond,
		"the re-pointed entry never reached node %d", i)
}

// I1 (docs/protocol.md, "One server, one vote"): an entry of the node list
// is verified on the server it reached when it was proven. Here entry 0 is
// a proxy in front of node 0 when New runs, and is then re-pointed to
// node 1, which entry 1 reaches too: go-redis reconnects, and the acquire
// script answers the second SET of the attempt's value as granted. Node 1
// must not count twice while another client holds a lease on nodes 0 and
// 2: the re-pointed entry's grant comes from another server than the one
// it was verified on, so it counts for nothing, the entry is verified no
// longer (and reported), and the proof that follows finds node 1 listed
// twice.
func TestIdentity_AnEntryRePointedToAnotherEntrysServerNeverCountsTwice(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := context.Background()
	cl := newCluster(t, 3)
	holder := cl.client(t, WithMaxTTL(ttl))
	require.NoError(t, holder.Bootstrap(ctx))
	var lg logs
	moved, px, list := proxiedClient(t, cl, WithMaxTTL(ttl), WithLogger(lg.logger()))

	// The holder's lease: nodes 0 and 2 (node 1 busy for a moment), then
	// node 1 is free.
	key := testenv.Key(t)
	cl.hold(t, key, 300*time.Millisecond, 1)
	first, err := holder.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Release(ctx) })
	require.Eventually(t, func() bool { return cl.value(t, 1, key) == "" }, 2*time.Second, 10*time.Millisecond,
		"node 1's other owner never let go")

	// The proxy now leads to node 1, and entry 0's client reconnects.
	repointTo(t, cl, px, list[0], 1)

	l, err := moved.TryLock(ctx, key, ttl)
	if err == nil {
		_ = l.Release(ctx)
		t.Fatalf("DOUBLE GRANT: the re-pointed entry counted node 1 twice while the holder's lease on nodes 0 and 2 was trusted (%v more)",
			time.Until(first.Deadline()).Round(time.Millisecond))
	}
	require.True(t, time.Now().Before(first.Deadline()), "the holder's lease ended before the check: it proves nothing")
	require.ErrorIs(t, err, ErrConfigMismatch)
	var dup *DuplicateNodeError
	require.ErrorAs(t, err, &dup, "the proof after the attempt did not find node 1 listed twice")
	require.Equal(t, [2]int{0, 1}, [2]int{dup.Node, dup.Other})
	require.False(t, verifiedOn(moved, 0), "the re-pointed entry is still verified")
	warned := lg.at(slog.LevelWarn, "no longer count")
	require.Len(t, warned, 1, "the entry's change of server was not reported once")
	require.Equal(t, int64(0), recordAttrs(warned[0])["node"].Int64())
}

// A renewal counts only from the server its entry was verified on: a lease
// held on nodes 0 and 1, whose entry 0 is then re-pointed to node 1 and
// whose key on node 0 is gone, must not be renewed by node 1's two
// answers.
func TestIdentity_AnExtendDoesNotCountARePointedEntrysNewServer(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := context.Background()
	cl := newCluster(t, 3)
	require.NoError(t, cl.client(t, WithMaxTTL(ttl)).Bootstrap(ctx))
	c, px, list := proxiedClient(t, cl, WithMaxTTL(ttl))

	key := testenv.Key(t)
	cl.hold(t, key, ttl, 2)
	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err, "nodes 0 and 1 are free")
	repointTo(t, cl, px, list[0], 1)
	cl.drop(t, key, 0)
	before := l.Deadline()
	err = l.Extend(ctx, ttl)
	require.Error(t, err, "node 1 renewed the lease as two votes, through its own entry and the re-pointed one")
	require.Equal(t, before, l.Deadline(), "a failed extend moved the deadline")
	require.False(t, verifiedOn(c, 0), "the re-pointed entry is still verified")
}
