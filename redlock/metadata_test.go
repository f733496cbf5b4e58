package redlock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

func keyMeta(key string) string { return script.MetaKey(key) }

// metaOn reads the metadata key of key on node i as the scripts keep it
// (owner, newline, metadata); "" when absent.
func (cl *cluster) metaOn(t *testing.T, i int, key string) string {
	t.Helper()
	return cl.value(t, i, keyMeta(key))
}

// Metadata round-trips through Lock, Extend and Inspect, lives exactly as
// long as the key, and is gone after Release.
func TestMetadata_FollowsTheLeaseThroughExtendAndRelease(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	const md = `host=web-3 pid=4121 cmd="backup.sh --full"`
	l, err := c.Lock(ctx, key, time.Second, WithMetadata(md))
	require.NoError(t, err)
	require.Equal(t, md, l.Metadata())
	settled(t, c, 2*time.Second)

	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, l.Value(), ks.Holder)
	require.Equal(t, md, ks.Metadata)
	for _, ns := range ks.Nodes {
		require.Equal(t, md, ns.Metadata, "node %d", ns.Node)
		require.Equal(t, l.Value()+"\n"+md, cl.metaOn(t, ns.Node, key))
	}

	// An extend past the first ttl keeps the metadata as long as the key.
	require.NoError(t, l.Extend(ctx, 5*time.Second))
	for i := range cl.raw {
		require.Eventually(t, func() bool { return cl.pttl(t, i, keyMeta(key)) > time.Second }, time.Second, time.Millisecond,
			"node %d: the metadata did not follow the extend", i)
		require.InDelta(t, float64(cl.pttl(t, i, key)), float64(cl.pttl(t, i, keyMeta(key))), float64(50*time.Millisecond),
			"node %d: the metadata and the key expire apart", i)
	}
	time.Sleep(1200 * time.Millisecond) // past the first ttl
	ks, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, md, ks.Metadata, "the metadata expired with the first ttl")

	require.NoError(t, l.Release(ctx))
	cl.requireGone(t, keyMeta(key), "the release left the metadata")
	ks, err = c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictFree, ks.Verdict)
	require.Empty(t, ks.Metadata)
}

// A release that hands the key to a waiting Lock call (WithKeyHandOff)
// gives it the waiter's own metadata, not the releaser's.
func TestMetadata_AHandOffCarriesTheWaitersOwn(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	a := cl.client(t)
	b := cl.client(t, slowRetry, WithKeyHandOff())
	require.NoError(t, a.Bootstrap(ctx))
	key := testenv.Key(t)
	la, err := a.TryLock(ctx, key, 5*time.Second, WithMetadata("host=a"))
	require.NoError(t, err)
	settled(t, a, 2*time.Second)

	lb := lockIn(t, b, key, 2*time.Second, WithMetadata("host=b"))
	cl.requireLineLen(t, key, 1, "b never joined the line")
	// A release hands the key only to a waiter whose Client listens on
	// the node: wait for b's subscription everywhere.
	ch := script.WakeChannel(b.wake.id)
	require.Eventually(t, func() bool {
		for _, raw := range cl.raw {
			n, err := raw.PubSubNumSub(ctx, ch).Result()
			if err != nil || n[ch] == 0 {
				return false
			}
		}
		return true
	}, 3*time.Second, time.Millisecond, "b's Client never listened on every node")
	l := releaseTo(t, la, lb)
	require.True(t, handedTo(valueOf(l)), "the lease was not handed over by the release: %q", valueOf(l))
	require.Equal(t, "host=b", l.Metadata())

	ks, err := b.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, valueOf(l), ks.Holder)
	require.Equal(t, "host=b", ks.Metadata, "a handed lease shows no (or the releaser's) metadata")

	require.NoError(t, l.Extend(ctx, 4*time.Second))
	// The extend reached a majority, not necessarily every node (and the
	// hand-off's metadata write is best effort per node): the metadata
	// must follow it on a majority of the nodes that hold the lease.
	require.Eventually(t, func() bool {
		n := 0
		for i := range cl.raw {
			if cl.value(t, i, key) == valueOf(l) && cl.pttl(t, i, keyMeta(key)) > 2*time.Second {
				n++
			}
		}
		return n >= 3
	}, 2*time.Second, time.Millisecond, "the handed lease's metadata did not follow its extend on a majority of nodes")
	require.NoError(t, l.Release(ctx))
	cl.requireGone(t, keyMeta(key), "the handed lease's release left its metadata")
}

// Metadata is information only: a leftover of another owner's metadata
// neither refuses a grant nor shows as the new holder's, and a lock
// without metadata shows none.
func TestMetadata_ALeftoverIsNotTheNewHoldersAndDecidesNothing(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	cl.set(t, keyMeta(key), "gone-owner\nhost=old", 5*time.Second, cl.all()...)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict)
	require.Empty(t, ks.Metadata, "another owner's leftover shows as the holder's")
	require.NoError(t, l.Release(ctx))
}

// Oversized metadata is refused before any node is touched; metadata of
// exactly the bound is stored whole.
func TestMetadata_OversizedIsRefusedWithoutTouchingANode(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	_, err := c.Lock(ctx, key, time.Second, WithMetadata(strings.Repeat("x", MaxMetadata+1)))
	require.ErrorIs(t, err, ErrMetadataTooLarge)
	require.Zero(t, f.total(), "oversized metadata reached a node")

	full := strings.Repeat("y", MaxMetadata)
	l, err := c.TryLock(ctx, key, time.Second, WithMetadata(full))
	require.NoError(t, err)
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, full, ks.Metadata)
	require.NoError(t, l.Release(ctx))
}

// Metadata on a deployment with nodes that refuse the client (their ACL
// takes the scripts away): one refusing node of five leaves the lease and
// its metadata on the four others, shown by Inspect and gone after the
// release; with three refusing, no grant leaves metadata behind on the
// two that would have granted.
func TestMetadata_WithNodesThatRefuse(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	const md = "job=nightly-report"

	cl.denyScripts(t, 4)
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second, WithMetadata(md))
	require.NoError(t, err, "one refusing node of five must not stop the lock")
	settled(t, c, 2*time.Second)
	for i := range 4 {
		require.Equal(t, l.Value()+"\n"+md, cl.metaOn(t, i, key), "node %d", i)
	}
	require.Empty(t, cl.metaOn(t, 4, key), "metadata on the refusing node")
	ks, err := c.Inspect(ctx, key)
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, ks.Summary)
	require.Equal(t, md, ks.Metadata)
	require.NoError(t, l.Release(ctx))
	settled(t, c, 2*time.Second)
	for i := range 5 {
		require.Empty(t, cl.metaOn(t, i, key), "node %d: metadata left after the release", i)
	}

	cl.denyScripts(t, 2)
	cl.denyScripts(t, 3)
	key = testenv.Key(t)
	_, err = c.TryLock(ctx, key, time.Second, WithMetadata(md))
	require.ErrorIs(t, err, ErrConfigMismatch)
	settled(t, c, 2*time.Second)
	for i := range 5 {
		require.Empty(t, cl.metaOn(t, i, key), "node %d: metadata left by a refused attempt", i)
		require.Empty(t, cl.value(t, i, key), "node %d: the key left by a refused attempt", i)
	}
}
