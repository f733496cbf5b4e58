package redlock

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// A release hands the key itself to the first Lock call in line (a call
// without fencing): the waiter holds the lock once a majority of nodes
// told it so, without a round trip of its own. The lease's value is the
// waiter id, its validity runs from before the call's first attempt (not
// from the notices), and its release frees every node.
func TestIntegrationAReleaseHandsTheKeyToTheWaiter(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a := wakeClient(t, ucs)
	var calls evalCounter
	b := countedClient(t, nodes, &calls, slowRetry, WithKeyHandOff())
	key, la := heldKey(t, a)

	const ttl = 2 * time.Second
	called := time.Now()
	lb := make(chan *Lease, 1)
	go func() {
		l, err := b.Lock(ctx, key, ttl)
		if err != nil {
			t.Error(err)
		}
		lb <- l
	}()
	// b is in line on every node, or was handed the key there already (a
	// node its first attempt reached before a's SET did: that attempt's
	// cleanup hands the key it freed to the first in line, b).
	var id []string
	require.Eventually(t, func() bool {
		id = id[:0]
		for _, uc := range ucs {
			in, _ := uc.ZRange(ctx, script.QueueKey(key), 0, -1).Result()
			if v, _ := uc.Get(ctx, key).Result(); strings.Contains(v, "~") {
				in = append(in, v)
			}
			if len(in) != 1 || (len(id) > 0 && in[0] != id[0]) {
				return false
			}
			id = append(id, in[0])
		}
		return true
	}, 3*time.Second, time.Millisecond, "b never joined the line")
	// Long enough that a validity counted from the hand-off would show.
	time.Sleep(500 * time.Millisecond)

	calls.n.Store(0)
	l := releaseTo(t, la, lb)
	require.Zero(t, calls.n.Load(), "the waiter sent script calls after the release: it took the key itself")
	require.Equal(t, id[0], l.value, "the lease's value is not the waiter id the release handed the key to")
	held := 0
	for _, uc := range ucs {
		if v, _ := uc.Get(ctx, key).Result(); v == id[0] {
			held++
			pttl, err := uc.PTTL(ctx, key).Result()
			require.NoError(t, err)
			require.Greater(t, pttl, time.Duration(0), "a handed key has no expiry")
			require.LessOrEqual(t, pttl, ttl, "a handed key outlives the waiter's ttl")
		}
	}
	require.GreaterOrEqual(t, held, 2, "the key holds the waiter id on fewer than a majority of nodes")
	limit := called.Add(ttl - drift.Drift(ttl, DefaultDriftFactor))
	require.False(t, l.Deadline().After(limit.Add(100*time.Millisecond)),
		"the validity runs from the hand-off (deadline %v after the call began + ttl)", l.Deadline().Sub(limit))
	require.True(t, l.Deadline().After(time.Now()), "the lease was handed over already expired")

	require.NoError(t, l.Release(ctx))
	requireFreeEverywhere(t, ucs, key, "the handed lease's release left the key on a node")
}

// Releases that hand the key to different waiters on different nodes
// (their lines differed) can leave none of them with a majority and no
// release to come. The calls settle it in line order: a call that sees a
// key handed to a call ahead of it gives its own handed keys back, and
// they go to the first in line, so the call ahead gets them. All three
// get the lock, one after the other, long before the handed keys expire.
func TestIntegrationHandOffsSplitBetweenWaitersSettleInLineOrder(t *testing.T) {
	nodes := testenv.RedisNodes(t, 5)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a := wakeClient(t, ucs)
	poll := WithRetry(func(int) time.Duration { return 50 * time.Millisecond }, 0)
	ws := []*Client{wakeClient(t, ucs, poll, WithKeyHandOff()), wakeClient(t, ucs, poll, WithKeyHandOff()), wakeClient(t, ucs, poll, WithKeyHandOff())}
	key, _ := heldKey(t, a) // a's key is replaced below; its lease is left to expire unused

	var inside atomic.Int32
	type result struct {
		who int
		at  time.Time
		err error
	}
	done := make(chan result, len(ws))
	for i, w := range ws {
		go func() {
			l, err := w.Lock(ctx, key, 5*time.Second)
			if err == nil {
				if inside.Add(1) != 1 {
					t.Errorf("waiter %d holds the lock together with another", i)
				}
				time.Sleep(20 * time.Millisecond)
				inside.Add(-1)
				err = l.Release(ctx)
			}
			done <- result{i, time.Now(), err}
		}()
		requireLineLen(t, ucs, key, int64(i+1), "a waiter never joined the line")
	}
	line, err := ucs[0].ZRange(ctx, script.QueueKey(key), 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, line, 3)

	// As if releases had handed nodes 0 and 1 to the first in line, 2 and
	// 3 to the second and 4 to the third: nobody holds a majority, and
	// no release is coming.
	start := time.Now()
	for i, uc := range ucs {
		id := line[[]int{0, 0, 1, 1, 2}[i]]
		require.NoError(t, uc.Set(ctx, key, id, 5*time.Second).Err())
		require.NoError(t, uc.ZRem(ctx, script.QueueKey(key), id).Err())
	}
	for range ws {
		select {
		case r := <-done:
			require.NoError(t, r.err, "waiter %d", r.who)
			t.Logf("waiter %d had the lock and let go %v after the split", r.who, r.at.Sub(start))
			require.Less(t, r.at.Sub(start), 3*time.Second, "waiter %d waited for the split's keys to expire", r.who)
		case <-time.After(4 * time.Second):
			t.Fatal("the split did not settle before the handed keys expire")
		}
	}
	requireFreeEverywhere(t, ucs, key, "a key handed to one of the waiters was left behind")
}

// A waiter whose process is gone (its Client's connections closed) is
// passed over: the release hands the key to the next in line instead of
// to an id nobody will take it for, which would hold the key up for that
// id's ttl.
func TestIntegrationAHandOffPassesOverAWaiterNobodyListensFor(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a, b := wakeClient(t, ucs), wakeClient(t, ucs, slowRetry, WithKeyHandOff())
	key, la := heldKey(t, a)
	// The gone waiter's place is ahead of b's on every node, and its id
	// takes hand-offs for 5 s.
	place := time.Now().UnixMicro() - 1000
	gone := "gone.x~" + strconv.FormatInt(place, 10) + "+5000"
	for _, uc := range ucs {
		require.NoError(t, uc.ZAdd(ctx, script.QueueKey(key), redis.Z{Score: float64(place), Member: gone}).Err())
	}
	lb := make(chan *Lease, 1)
	go func() {
		l, err := b.Lock(ctx, key, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		lb <- l
	}()
	requireLineLen(t, ucs, key, 2, "b never joined the line")
	start := time.Now()
	l := releaseTo(t, la, lb)
	t.Logf("b had the key %v after the release", time.Since(start))
	require.Less(t, time.Since(start), time.Second, "the key was handed to the gone waiter")
	for i, uc := range ucs {
		v, _ := uc.Get(ctx, key).Result()
		require.NotEqual(t, gone, v, "node %d handed the key to the gone waiter", i)
	}
	require.NoError(t, l.Release(ctx))
}

// Without WithKeyHandOff (the default) the release keeps the free key for
// the first in line (a reservation), and the call takes it with an acquire
// round of its own, as fenced calls do.
func TestIntegrationByDefaultTheWaiterTakesTheKeyItself(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a := wakeClient(t, ucs)
	var calls evalCounter
	b := countedClient(t, nodes, &calls, slowRetry)
	key, la := heldKey(t, a)
	lb := make(chan *Lease, 1)
	go func() {
		l, err := b.Lock(ctx, key, 2*time.Second)
		if err != nil {
			t.Error(err)
		}
		lb <- l
	}()
	requireLineLen(t, ucs, key, 1, "b never joined the line")
	id, err := ucs[0].ZRange(ctx, script.QueueKey(key), 0, 0).Result()
	require.NoError(t, err)
	require.NotContains(t, id[0], "+", "the waiter id offers to take hand-offs")
	time.Sleep(100 * time.Millisecond)
	calls.n.Store(0)
	l := releaseTo(t, la, lb)
	require.Positive(t, calls.n.Load(), "the waiter took the key without an attempt")
	require.NotEqual(t, id[0], l.value)
	require.NoError(t, l.Release(ctx))
}

// splitAgainstAGoneCall sets up, on rc, the key state after releases that
// handed nodes 0-2 to a Lock call ahead of waiter (its process then
// died: nobody listens for its id) and nodes 3 and 4 to waiter, and tells
// waiter's Client about nodes 3 and 4 as the releases do. waiter's
// attempts then see the call ahead (-6) and give its keys back; on 3 and 4
// nobody else is in line, so the give-back hands them back to waiter's new
// id.
func splitAgainstAGoneCall(t *testing.T, rc *realCluster, key, waiter string) {
	t.Helper()
	ctx := context.Background()
	place, err := strconv.ParseInt(waiter[strings.LastIndex(waiter, "~")+1:strings.LastIndex(waiter, "+")], 10, 64)
	require.NoError(t, err)
	gone := "gone.x~" + strconv.FormatInt(place-1000, 10) + "+5000"
	cid := waiter[:strings.Index(waiter, ".")]
	for i, uc := range rc.raw {
		if i < 3 {
			require.NoError(t, uc.Set(ctx, key, gone, 5*time.Second).Err())
			continue
		}
		require.NoError(t, uc.Set(ctx, key, waiter, 5*time.Second).Err())
		require.NoError(t, uc.ZRem(ctx, script.QueueKey(key), waiter).Err())
		require.NoError(t, uc.Publish(ctx, script.WakeChannel(cid), "!"+waiter+"|"+key).Err())
	}
}

// From a red-team review: a Lock call that gives its handed keys back
// takes a new id in the same step on every node, and a line-leave of that
// new id (the call gives up) must land after the give-back: where it
// overtakes it, the give-back puts the new id in line after it left, and
// hands it the key, for an id nobody takes, for one ttl. Here node 3
// answers the give-back 300 ms late and the call gives up meanwhile.
func TestLock_AGiveBackLandsBeforeTheLineLeaveOfTheNewID(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	ucs := rc.universal()
	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	var landed atomic.Bool // the give-back reached node 3
	slow := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 3 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(_ context.Context, script string, keys []string, args []any) *redis.Cmd {
			if script == "release" && isTestKey(keys[0]) && len(args) == 10 { // a give-back: old id, new id, place
				giveUp()
				time.Sleep(300 * time.Millisecond)
			}
			return nil
		}, after: func(_ context.Context, script string, keys []string, args []any, _ *redis.Cmd) {
			if script == "release" && isTestKey(keys[0]) && len(args) == 10 {
				landed.Store(true)
			}
		}}
	}
	h := rc.client(t, nil, nil)
	w := rc.client(t, slow, nil, WithKeyHandOff(), WithRetry(func(int) time.Duration { return 200 * time.Millisecond }, 0))
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	rc.hold(t, key, 30*time.Second, 0, 1, 2, 3, 4)
	done := make(chan error, 1)
	go func() {
		_, err := w.Lock(wctx, key, 5*time.Second)
		done <- err
	}()
	requireLineLen(t, ucs, key, 1, "the waiter never joined the line")
	line, err := rc.raw[0].ZRange(ctx, script.QueueKey(key), 0, 0).Result()
	require.NoError(t, err)
	splitAgainstAGoneCall(t, rc, key, line[0])
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter never gave its keys back")
	}
	// The Client stays open (its waiters' notice channel subscribed), as
	// a process whose call gave up goes on.
	require.Eventually(t, func() bool { return landed.Load() }, 2*time.Second, time.Millisecond, "the give-back never reached node 3")
	cid := line[0][:strings.Index(line[0], ".")]
	retired := func() (int, string) {
		for i := range 5 {
			if v := rc.value(t, i, key); strings.Contains(v, cid) {
				return i, "holds the key for " + v
			}
			in, err := rc.raw[i].ZRange(ctx, script.QueueKey(key), 0, -1).Result()
			require.NoError(t, err)
			for _, id := range in {
				if strings.Contains(id, cid) {
					return i, "has in line " + id
				}
			}
		}
		return -1, ""
	}
	require.Eventually(t, func() bool { i, _ := retired(); return i < 0 }, time.Second, 5*time.Millisecond,
		"a retired id of the waiter is left on a node")
	// and stays gone: nothing of the call is still on its way
	time.Sleep(200 * time.Millisecond)
	i, what := retired()
	require.Negative(t, i, "node %d %s", i, what)
}

// From a red-team review: a call that holds handed keys without a
// majority and sees a key handed to a call ahead (-6) gives its keys
// back; where nobody else is in line, the give-back hands them straight
// back to its new id and tells it, which woke it for another attempt,
// another -6 and another give-back: one attempt and one give-back every
// few ms, whatever the retry delay, for as long as the call ahead held its
// keys (here a call whose process died after releases handed it a
// majority: until its ttl ran out). A call gives keys back for a call
// ahead at most once per retry delay.
func TestLock_GivesKeysBackAtMostOncePerRetryDelay(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	ucs := rc.universal()
	counts := &scriptCounts{script: "acquire"}
	count := func(i int, sc redis.Scripter) redis.Scripter { return counts.wrap(i, sc, nil) }
	h := rc.client(t, nil, nil)
	w := rc.client(t, count, nil, WithKeyHandOff(), slowRetry)
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)
	rc.hold(t, key, 30*time.Second, 0, 1, 2, 3, 4)
	const wait = 1500 * time.Millisecond
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := w.Lock(wctx, key, 5*time.Second)
		done <- err
	}()
	requireLineLen(t, ucs, key, 1, "the waiter never joined the line")
	line, err := rc.raw[0].ZRange(ctx, script.QueueKey(key), 0, 0).Result()
	require.NoError(t, err)
	before := counts.n[0].Load()
	splitAgainstAGoneCall(t, rc, key, line[0])
	require.ErrorIs(t, <-done, context.DeadlineExceeded)
	n := counts.n[0].Load() - before
	t.Logf("%d attempts after the split", n)
	// The attempt on the notice, the one after the first give-back's hand
	// back, and slack; the retry delay is 5 s.
	require.LessOrEqual(t, n, int64(4), "the waiter spun attempts and give-backs")
}
