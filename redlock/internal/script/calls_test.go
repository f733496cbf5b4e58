package script

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
)

// The typed calls send the positional KEYS and ARGV the scripts' headers
// describe. The contract cases build their calls with the same builders,
// so a reordered ARGV fails a behaviour case there too; but they build
// each release from its own ReleaseArgs, and a release made from an
// attempt (Acquire.ReleaseArgs, whose boxes it shares: a lease's release,
// a failed attempt's cleanup) is checked here alone. A swap of its queue
// and reservation keys, or its place taken from the ttl's box, failed
// this test and no contract case.
// A deployment's settings as the calls carry them, and two others.
const (
	ctSettings = "v1 nodes=5 maxttl=1000ms drift=0.01"
	ctOther    = "v1 nodes=5 maxttl=200ms drift=0.01"
	ctThird    = "v1 nodes=3 maxttl=1000ms drift=0.01"
)

func TestCalls_PositionalLayout(t *testing.T) {
	var b Boxes
	a := AcquireArgs{Key: "k", Value: "v", TTL: 5 * time.Second, Settings: ctSettings, Waiter: "c1.w~100+5000", Place: 100, Line: 10 * time.Second}
	acq := b.Acquire(a)
	require.Equal(t, []any{"evalsha", acquireScript.Hash(), 9,
		"k", "k", MarkerKey, TombKey("v"), QueueKey("k"), NamedKey("k"), SeenKey("k"), IdentKey, LinedKey("k"),
		"v", int64(5000), ctSettings, "0", "c1.w~100+5000", int64(10000), int64(100)}, acq.cmd)
	a.Fencing = true
	require.Equal(t, FenceKey("k"), b.Acquire(a).cmd[4])
	require.Equal(t, "1", b.Acquire(a).cmd[15])

	relKeys := []any{"k", TombKey("v"), QueueKey("k"), NamedKey("k"), SeenKey("k"), MarkerKey, IdentKey, LinedKey("k")}
	// A lease's release: the waiter leaves the line.
	r := acq.ReleaseArgs()
	r.Window = 30 * time.Millisecond
	require.Equal(t, append([]any{"evalsha", releaseScript.Hash(), 8}, append(relKeys,
		"v", ReleaseChannel("k"), int64(5000), "c1.w~100+5000", int64(30), "", int64(10000), wakePrefix)...), b.Release(r).cmd)
	// A failed attempt's cleanup: the waiter goes back to its place.
	r.Back = true
	require.Equal(t, int64(100), b.Release(r).cmd[3+8+5])
	// Leaving the line under a fresh value, no tombstone.
	leave := ReleaseArgs{Key: "k", Value: "fresh", Waiter: "c1.w~100+5000", Window: 30 * time.Millisecond, Place: 100, Line: 10 * time.Second}
	require.Equal(t, []any{"evalsha", releaseScript.Hash(), 8, "k", TombKey("fresh"), QueueKey("k"), NamedKey("k"), SeenKey("k"), MarkerKey, IdentKey, LinedKey("k"),
		"fresh", ReleaseChannel("k"), int64(0), "c1.w~100+5000", int64(30), "", int64(10000), wakePrefix}, b.Release(leave).cmd)
	// A give-back: the new id takes the place.
	leave.Next = "c1.x~100+5000"
	require.Equal(t, []any{"c1.x~100+5000", int64(100)}, b.Release(leave).cmd[19:])

	require.Equal(t, []any{"evalsha", commitScript.Hash(), 3, "k", FenceKey("k"), IdentKey, "v", "18446744073709551615", int64(7000)},
		NewCommit(CommitArgs{Key: "k", Value: "v", Token: 1<<64 - 1, Keep: 7 * time.Second}).cmd)
	require.Equal(t, []any{"evalsha", extendScript.Hash(), 4, "a", "b", MarkerKey, IdentKey, "va", int64(1000), "vb", int64(2000)},
		NewExtend([]ExtendArgs{{Key: "a", Value: "va", TTL: time.Second}, {Key: "b", Value: "vb", TTL: 2 * time.Second}}, "").cmd)

	// Holder metadata: a KEYS and an ARGV after the others where a call
	// carries it, and none where it does not.
	a.Fencing, a.Metadata = false, "host=a"
	macq := b.Acquire(a)
	require.Equal(t, []any{"evalsha", acquireScript.Hash(), 10,
		"k", "k", MarkerKey, TombKey("v"), QueueKey("k"), NamedKey("k"), SeenKey("k"), IdentKey, LinedKey("k"), MetaKey("k"),
		"v", int64(5000), ctSettings, "0", "c1.w~100+5000", int64(10000), int64(100), "host=a"}, macq.cmd)
	mr := macq.ReleaseArgs()
	require.True(t, mr.Meta)
	require.Equal(t, append([]any{"evalsha", releaseScript.Hash(), 9}, append(append(relKeys, MetaKey("k")),
		"v", ReleaseChannel("k"), int64(5000), "c1.w~100+5000", int64(0), "", int64(10000), wakePrefix)...), b.Release(mr).cmd)
	require.Equal(t, []any{"evalsha", extendScript.Hash(), 6, "a", "b", MarkerKey, IdentKey, MetaKey("a"), MetaKey("b"), "va", int64(1000), "vb", int64(2000)},
		NewExtend([]ExtendArgs{{Key: "a", Value: "va", TTL: time.Second, Meta: true}, {Key: "b", Value: "vb", TTL: 2 * time.Second}}, "").cmd)
	require.Equal(t, []any{"evalsha", metaScript.Hash(), 2, "k", MetaKey("k"), "c1.w~100+5000", "host=a"},
		NewMeta(MetaArgs{Key: "k", Value: "c1.w~100+5000", Metadata: "host=a"}).cmd)
}

// The typed calls and replies on redis-server: a grant, a waiter that
// joins the line behind it, the release that hands it the key, and the
// admission state as the scripts report it.
func TestCalls_OnRedis(t *testing.T) {
	ctx := context.Background()
	rc := testenv.Redis(t).Client(t)
	n := NewNode(redisconn.New(rc), time.Second)
	var b Boxes
	require.NoError(t, rc.Set(ctx, MarkerKey, ctSettings, 0).Err())
	key := testenv.Key(t)

	first := b.Acquire(AcquireArgs{Key: key, Value: "v1", TTL: 5 * time.Second, Settings: ctSettings, Fencing: true, Line: 10 * time.Second})
	r, err := first.Run(ctx, n)
	require.NoError(t, err)
	require.Equal(t, Granted, r.Status)
	require.Positive(t, r.TimeUs)
	require.Empty(t, r.Ident, "a server with no identity yet")
	id, err := n.Ident(ctx, "srv")
	require.NoError(t, err)
	r, err = first.Run(ctx, n)
	require.NoError(t, err)
	require.Equal(t, AcquireReply{Status: Granted, TimeUs: r.TimeUs, Ident: id}, r, "a repeated SET of our value, on a server with an identity")
	c, err := NewCommit(CommitArgs{Key: key, Value: "v1", Token: 7, Keep: time.Second}).Run(ctx, n)
	require.NoError(t, err)
	require.Equal(t, CommitReply{Committed: true, Ident: id}, c)
	e, err := NewExtend([]ExtendArgs{{Key: key, Value: "v1", TTL: 5 * time.Second}, {Key: key, Value: "v0", TTL: time.Second}}, "").Run(ctx, n)
	require.NoError(t, err)
	require.True(t, e.Renewed(0))
	require.False(t, e.Renewed(1))
	require.Equal(t, id, e.Ident)

	w := WaiterID{Client: "c2", Nonce: "n", Place: time.Now().UnixMicro(), TTL: 4 * time.Second}
	second := b.Acquire(AcquireArgs{Key: key, Value: "v2", TTL: 4 * time.Second, Settings: ctSettings, Waiter: w.String(), Place: w.Place, Line: 10 * time.Second})
	r, err = second.Run(ctx, n)
	require.NoError(t, err)
	require.Equal(t, Held, r.Status)
	require.InDelta(t, 5000, r.PTTL, 500)

	ps := rc.Subscribe(ctx, WakeChannel("c2"))
	t.Cleanup(func() { _ = ps.Close() })
	_, err = ps.Receive(ctx)
	require.NoError(t, err)
	rel := first.ReleaseArgs()
	rel.Window = time.Second
	ok, err := b.Release(rel).Run(ctx, n)
	require.NoError(t, err)
	require.True(t, ok)
	msg, err := ps.ReceiveMessage(ctx)
	require.NoError(t, err)
	notice, ok := ParseNotice(msg.Channel, msg.Payload)
	require.True(t, ok)
	require.Equal(t, Notice{Key: key, Names: w.String(), Handed: true, Server: id}, notice)
	r, err = second.Run(ctx, n)
	require.NoError(t, err)
	require.Equal(t, HandedHere, r.Status)

	st, err := n.State(ctx)
	require.NoError(t, err)
	require.Equal(t, ctSettings, st.Marker)
	require.False(t, st.HasKey)

	cmds := []driver.Cmd{{Args: StateArgs(key)}}
	redisconn.New(rc).Pipeline(ctx, cmds)
	st, err = StateOf(cmds[0].Val, cmds[0].Err)
	require.NoError(t, err)
	require.True(t, st.HasKey)
	require.Equal(t, w.String(), st.Value)

	require.NoError(t, rc.Del(ctx, MarkerKey).Err())
	p, err := n.Pending(ctx, PendingArgs{ID: "m1", Settings: ctSettings, Quarantine: 2 * time.Second, TTL: time.Minute})
	require.NoError(t, err)
	require.Empty(t, p.Marker)
	require.Equal(t, "m1", p.ID)
	require.InDelta(t, float64(2*time.Second), float64(p.Quarantine.Left()), float64(100*time.Millisecond))
	st, err = n.State(ctx)
	require.NoError(t, err)
	require.Equal(t, ctSettings, st.Pending)
	require.InDelta(t, float64(2*time.Second), float64(st.Quarantine.Left()), float64(200*time.Millisecond))
	adm, err := n.Admit(ctx, AdmitArgs{ID: "m1", Settings: ctSettings})
	require.NoError(t, err)
	require.Equal(t, NotAdmitted, adm, "a quarantine two seconds young admitted")

	again, err := n.Ident(ctx, "other")
	require.NoError(t, err)
	require.Equal(t, id, again, "a server's identity is written once")
}

// A reconfiguration's typed calls and replies on redis-server: an old
// node refuses the old settings, gets its hold-off, is not admitted while
// it lasts and is once it is over; a node of another deployment is named.
func TestCalls_ReconfigureOnRedis(t *testing.T) {
	ctx := context.Background()
	rc := testenv.Redis(t).Client(t)
	n := NewNode(redisconn.New(rc), time.Second)
	require.NoError(t, rc.Set(ctx, MarkerKey, ctSettings, 0).Err())
	step := func(s ReconfigureStep) ReconfigureReply {
		t.Helper()
		r, err := n.Reconfigure(ctx, ReconfigureArgs{Step: s, From: ctSettings, To: ctOther,
			HoldOff: 300 * time.Millisecond, TTL: time.Minute, ID: "h1"})
		require.NoError(t, err)
		return r
	}
	require.Equal(t, ReconfigureReply{Status: ReconfigureDone}, step(StepRefuse))
	require.Equal(t, ReconfigureReply{Status: ReconfigureWaiting, Left: -time.Microsecond}, step(StepFinish))
	require.Equal(t, ReconfigureReply{Status: ReconfigureDone, Left: 300 * time.Millisecond}, step(StepHold))
	w := step(StepFinish)
	require.Equal(t, ReconfigureWaiting, w.Status)
	require.Greater(t, w.Left, 200*time.Millisecond)
	to, ok := MovingTo(rc.Get(ctx, MarkerKey).Val())
	require.True(t, ok)
	require.Equal(t, ctOther, to)
	time.Sleep(w.Left + 10*time.Millisecond)
	require.Equal(t, ReconfigureReply{Status: ReconfigureDone}, step(StepFinish))
	require.Equal(t, ctOther, rc.Get(ctx, MarkerKey).Val())
	require.Equal(t, ReconfigureReply{Status: ReconfigureAlready}, step(StepHold))

	require.NoError(t, rc.Set(ctx, MarkerKey, ctThird, 0).Err())
	require.Equal(t, ReconfigureReply{Status: ReconfigureOther, Marker: ctThird}, step(StepRefuse))
}
