package redlock

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// A release notice that arrives after a waiter's failed attempt began but
// before the waiter registered is delivered at registration, with the
// waiter's place in it; the waiter may skip its extra attempt only when
// the subscription was live before the attempt began.
func TestWakerDeliversANoticeThatCameBeforeRegistration(t *testing.T) {
	c, _ := newTestClient(t, 5)
	w := c.wake
	_, unregister, live := w.register("k", "early", time.Now())
	require.False(t, live, "a subscription nobody confirmed counted as live")
	w.mu.Lock()
	w.waiters["k"].liveSince = time.Now().Add(-time.Second) // as if a majority confirmed it
	w.mu.Unlock()
	unregister() // the key lingers, still subscribed

	since := time.Now()
	w.notify("k", "other second")
	ch, unregister2, live := w.register("k", "second", since)
	defer unregister2()
	require.True(t, live)
	select {
	case pos := <-ch:
		require.Equal(t, wakeSecond, pos)
	default:
		t.Fatal("a notice that named the waiter after its attempt began was lost")
	}

	ch3, unregister3, _ := w.register("k", "third", since)
	defer unregister3()
	select {
	case pos := <-ch3:
		t.Fatalf("a notice naming others woke a third waiter (position %d)", pos)
	default:
	}
	ch4, unregister4, _ := w.register("k", "fourth", time.Now())
	defer unregister4()
	select {
	case <-ch4:
		t.Fatal("a notice from before the attempt began was delivered")
	default:
	}
}

// A waiter that registers with both a hand-off recorded for its id and a
// release notice from after its attempt began gets one wake-up, the
// hand-off, and register returns. Before the fix register sent the second
// wake-up into the full channel while holding the waker's lock, and the
// Client's waker hung for good (every later notice, Close too).
func TestWakerRegisterWithAHandOffAndANoticeDoesNotBlock(t *testing.T) {
	c, _ := newTestClient(t, 5)
	w := c.wake
	_, unregister, _ := w.register("k", "early", time.Now())
	w.mu.Lock()
	w.waiters["k"].liveSince = time.Now().Add(-time.Second) // as if a majority confirmed it
	w.mu.Unlock()
	unregister() // the key lingers, still subscribed

	since := time.Now()
	w.handedBy(0, "k", "late") // a release handed node 0 to it before it registered
	w.notify("k", "")          // and a release with nobody in line woke everyone
	requireRegistersWith(t, w, "k", "late", since, wakePart)
}

// requireRegistersWith registers id for key in w and requires register to
// return within 2 s with the one wake-up want waiting in the channel.
func requireRegistersWith(t *testing.T, w *waker, key, id string, since time.Time, want int) {
	t.Helper()
	type reg struct {
		ch         chan int
		unregister func()
	}
	done := make(chan reg, 1)
	go func() {
		ch, unregister, _ := w.register(key, id, since)
		done <- reg{ch, unregister}
	}()
	select {
	case r := <-done:
		defer r.unregister()
		requireWake(t, r.ch, want)
	case <-time.After(2 * time.Second):
		t.Fatal("register blocked: a second wake-up was sent into the waiter's full channel under the waker's lock")
	}
}

// A key whose last waiter left stays subscribed for linger, then is
// unsubscribed: a key contended again and again costs no SUBSCRIBE per
// Lock call, and an idle one costs nothing for long.
func TestIntegrationWakerKeepsAContendedKeySubscribedForAWhile(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	c, err := New(ucs, WithRetry(func(int) time.Duration { return 20 * time.Millisecond }, 0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.Bootstrap(context.Background()))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	other, err := New(ucs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close() })
	go func() {
		time.Sleep(100 * time.Millisecond)
		_ = l.Release(ctx)
	}()
	l2, err := other.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
	subscribed := func() bool {
		chans, err := ucs[0].PubSubChannels(ctx, "*").Result()
		require.NoError(t, err)
		return slices.Contains(chans, script.ReleaseChannel(key))
	}
	require.True(t, subscribed(), "the key was unsubscribed as soon as its waiter left")
	require.Eventually(t, func() bool { return !subscribed() }, linger+3*time.Second, 50*time.Millisecond,
		"the key stayed subscribed past linger")
}

// A waiter that has not read its wake-up yet gets the newest notice's
// position, not the first one's: a release that names it first after an
// older one named it second must not leave it waiting a round trip or two
// as the second in line, while the reservation for it runs. And a notice
// that came before an attempt began is answered by that attempt.
func TestWakerKeepsTheNewestNotice(t *testing.T) {
	c, _ := newTestClient(t, 5)
	w := c.wake
	ch, unregister, _ := w.register("k", "w", time.Now())
	defer unregister()
	w.notify("k", "other w")
	w.notify("k", "w other")
	requireWake(t, ch, wakeFirst)

	w.notify("k", "w other")
	w.attempting(ch)
	select {
	case pos := <-ch:
		t.Fatalf("a notice from before the attempt began woke the waiter after it (position %d)", pos)
	default:
	}
}

// The same through real redis-server Pub/Sub: two notices published on a
// node in a row reach the waiter as the newer one.
func TestIntegrationWakerKeepsTheNewestNotice(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	c, err := New(ucs)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	key := testenv.Key(t)
	w := c.wake
	ch, unregister, _ := w.register(key, "w", time.Now())
	defer unregister()
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.waiters[key].liveSince.IsZero()
	}, 5*time.Second, 10*time.Millisecond, "the subscription was never confirmed by a majority")

	ctx := context.Background()
	require.NoError(t, ucs[0].Publish(ctx, script.ReleaseChannel(key), "other w").Err())
	require.NoError(t, ucs[0].Publish(ctx, script.ReleaseChannel(key), "w other").Err())
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.waiters[key].lastNames == "w other"
	}, 5*time.Second, 5*time.Millisecond, "the second notice never arrived")
	requireWake(t, ch, wakeFirst)
}

// The same through real redis-server Pub/Sub and a Client that takes
// hand-offs: a hand-off notice for an id not yet registered ('!id|key' on
// the Client's own channel) and a release notice for the key (” on the
// key's channel) both arrive before the id registers; register returns at
// once with one wake-up, the hand-off.
func TestIntegrationWakerRegisterWithAHandOffAndANoticeDoesNotBlock(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	c := wakeClient(t, ucs, WithKeyHandOff())
	key := testenv.Key(t)
	w := c.wake
	_, unregister, _ := w.register(key, "early", time.Now())
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.waiters[key].liveSince.IsZero()
	}, 5*time.Second, 10*time.Millisecond, "the subscription was never confirmed by a majority")
	unregister() // the key lingers, still subscribed

	ctx := context.Background()
	since := time.Now()
	late := w.id + ".late"
	require.NoError(t, ucs[0].Publish(ctx, script.WakeChannel(w.id), "!"+late+"|"+key).Err())
	require.NoError(t, ucs[1].Publish(ctx, script.ReleaseChannel(key), "").Err())
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		kw := w.waiters[key]
		return kw.handed[late] != nil && kw.lastAt.After(since)
	}, 5*time.Second, 5*time.Millisecond, "the two notices never arrived")

	requireRegistersWith(t, w, key, late, since, wakePart)
}

// slowRetry puts a waiter's own next try 5 s away, so that within a test
// only a release's notice can wake it.
var slowRetry = WithRetry(func(int) time.Duration { return 5 * time.Second }, 0)

// releaseTo releases la and returns the lease the first in line's Lock
// call sends on lb, within 3 s.
func releaseTo(t *testing.T, la *Lease, lb <-chan *Lease) *Lease {
	t.Helper()
	require.NoError(t, la.Release(context.Background()))
	select {
	case l := <-lb:
		require.NotNil(t, l, "the first in line's Lock failed")
		return l
	case <-time.After(3 * time.Second):
		t.Fatal("the first in line did not get the key")
		return nil
	}
}

// requireFreeEverywhere waits until no node of ucs holds key.
func requireFreeEverywhere(t *testing.T, ucs []redis.UniversalClient, key, what string) {
	t.Helper()
	requireOnEveryNode(t, ucs, key, 0, what)
}

// requireHeldEverywhere waits until every node of ucs holds key.
func requireHeldEverywhere(t *testing.T, ucs []redis.UniversalClient, key string) {
	t.Helper()
	requireOnEveryNode(t, ucs, key, 1, "the lease's key never reached every node")
}

// requireOnEveryNode waits until EXISTS key answers n (0 or 1) on every
// node of ucs.
func requireOnEveryNode(t *testing.T, ucs []redis.UniversalClient, key string, n int64, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, uc := range ucs {
			if got, err := uc.Exists(context.Background(), key).Result(); err != nil || got != n {
				return false
			}
		}
		return true
	}, 2*time.Second, time.Millisecond, what)
}

// requireLineLen waits until key's line holds n Lock calls on each of ucs;
// if it never does, it logs what each node holds before failing.
func requireLineLen(t *testing.T, ucs []redis.UniversalClient, key string, n int64, what string) {
	t.Helper()
	ctx := context.Background()
	if assert.Eventually(t, func() bool {
		for _, uc := range ucs {
			if got, err := uc.ZCard(ctx, script.QueueKey(key)).Result(); err != nil || got != n {
				return false
			}
		}
		return true
	}, 3*time.Second, time.Millisecond, what) {
		return
	}
	for i, uc := range ucs {
		v, _ := uc.Get(ctx, key).Result()
		q, err := uc.ZRangeWithScores(ctx, script.QueueKey(key), 0, -1).Result()
		t.Logf("node %d holds %q, line %v (%v)", i, v, q, err)
	}
	t.FailNow()
}

// heldKey admits a's nodes at once and has a take a fresh key for 5 s.
func heldKey(t *testing.T, a *Client) (string, *Lease) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, a.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := a.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	return key, l
}

// wakeClient is a Client over ucs, closed when the test ends.
func wakeClient(t *testing.T, ucs []redis.UniversalClient, opts ...Option) *Client {
	t.Helper()
	c, err := New(ucs, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func requireWake(t *testing.T, ch chan int, want int) {
	t.Helper()
	select {
	case pos := <-ch:
		require.Equal(t, want, pos, "the waiter was woken with an older notice's position")
	default:
		t.Fatal("the waiter was not woken")
	}
}

// A release notice goes only to the Client whose waiter it names, on its
// own channel, and not to the key's channel, which every waiter of the key
// listens to: with 8 Clients waiting, a release used to make all of them
// read a notice that named 2.
func TestIntegrationReleaseNoticeGoesToTheNamedClientsOnly(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a, b, c, d := wakeClient(t, ucs, slowRetry), wakeClient(t, ucs, slowRetry), wakeClient(t, ucs, slowRetry), wakeClient(t, ucs, slowRetry)
	key, la := heldKey(t, a)

	chans := []string{script.ReleaseChannel(key), script.WakeChannel(b.wake.id), script.WakeChannel(c.wake.id), script.WakeChannel(d.wake.id)}
	ps := ucs[0].Subscribe(ctx, chans...)
	defer ps.Close()
	for range chans {
		_, err := ps.ReceiveTimeout(ctx, 5*time.Second) // the confirmations
		require.NoError(t, err)
	}

	// b, c, d join the line in that order; each retries only after 5 s
	// unless a release wakes it.
	done := make(chan error, 3)
	for i, w := range []*Client{b, c, d} {
		go func() {
			l, err := w.Lock(ctx, key, 5*time.Second)
			if err == nil {
				err = l.Release(ctx)
			}
			done <- err
		}()
		requireLineLen(t, ucs[:1], key, int64(i+1), "a waiter never joined the line on node 0")
	}
	line, err := ucs[0].ZRange(ctx, script.QueueKey(key), 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, line, 3)

	require.NoError(t, la.Release(ctx))
	heard := map[string][]string{}
	for {
		m, err := ps.ReceiveTimeout(ctx, 300*time.Millisecond)
		if err != nil {
			break // quiet for 300 ms
		}
		if msg, ok := m.(*redis.Message); ok {
			heard[msg.Channel] = append(heard[msg.Channel], msg.Payload)
		}
	}
	for range 3 {
		require.NoError(t, <-done)
	}
	// Each release named the next in line alone, and told its Client only.
	// A Client may hear its waiter named more than once: an attempt that
	// split the nodes puts the call back in its place, and the cleanup's
	// release names it again.
	for i, w := range []*Client{b, c, d} {
		got := heard[script.WakeChannel(w.wake.id)]
		require.NotEmpty(t, got, "waiter %d's Client was never told", i)
		for _, p := range got {
			require.Equal(t, line[i]+"|"+key, p, "waiter %d's Client heard a notice for another", i)
		}
	}
	// The key's channel carries only "nobody is in line" (d's release,
	// after b and c had their turns, and any cleanup after it).
	for _, p := range heard[script.ReleaseChannel(key)] {
		require.Empty(t, p, "a release that named waiters published on the key's channel")
	}
}

// countedClient is a wakeClient over connections of its own to nodes,
// whose script calls calls counts.
func countedClient(t *testing.T, nodes []*testenv.RedisNode, calls *evalCounter, opts ...Option) *Client {
	t.Helper()
	ucs := testenv.Clients(t, nodes)
	for _, uc := range ucs {
		uc.AddHook(calls)
	}
	return wakeClient(t, ucs, opts...)
}

// evalCounter counts the script calls a client sends.
type evalCounter struct{ n atomic.Int64 }

func (h *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A release names the first Lock call in line alone: the second makes no
// attempt while the first takes the key and holds it. Naming the first two
// made the second try one to two round trips later, in case the first was
// gone, and that attempt found the key taken at almost every hand-off:
// with 8 Clients on one key, a fifth of all Redis calls.
func TestIntegrationAHandOffWakesOnlyTheFirstInLine(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a, b := wakeClient(t, ucs), wakeClient(t, ucs, slowRetry)
	var calls evalCounter
	c := countedClient(t, nodes, &calls, slowRetry)
	key, la := heldKey(t, a)
	lb := make(chan *Lease, 1)
	done := make(chan error, 1)
	go func() {
		l, err := b.Lock(ctx, key, 5*time.Second)
		if err != nil {
			t.Error(err)
		}
		lb <- l
	}()
	requireLineLen(t, ucs, key, 1, "b never joined the line")
	go func() {
		l, err := c.Lock(ctx, key, 5*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	requireLineLen(t, ucs, key, 2, "c never joined the line")
	time.Sleep(300 * time.Millisecond) // c's attempts on joining are over; its next waits 5 s

	calls.n.Store(0)
	l := releaseTo(t, la, lb)
	time.Sleep(300 * time.Millisecond)
	require.Zero(t, calls.n.Load(), "the second in line sent script calls while the first took and held the key")
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("the second in line was not handed the key by the first's release")
	}
}

// A release names a Lock call that is gone (its process crashed with its
// place in line): the key is kept for it for one reservation only, and the
// next waiter, with the default retry policy, takes it soon after.
func TestIntegrationAHandOffToAGoneWaiterCostsOneReservation(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a, c := wakeClient(t, ucs), wakeClient(t, ucs)
	key, la := heldKey(t, a)
	// The gone waiter's place is ahead of c's on every node.
	for _, uc := range ucs {
		require.NoError(t, uc.ZAdd(ctx, script.QueueKey(key), redis.Z{Score: float64(time.Now().UnixMicro() - 1000), Member: "gone.x"}).Err())
	}
	got := make(chan time.Time, 1)
	go func() {
		l, err := c.Lock(ctx, key, 5*time.Second)
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		_ = l.Release(ctx)
	}()
	requireLineLen(t, ucs[:1], key, 2, "c never joined the line")
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	require.NoError(t, la.Release(ctx))
	// Release returns once a majority confirmed: node 0 may still be on
	// its way. The reservation names the gone waiter (or has already run
	// out, if c took the key).
	var named string
	require.Eventually(t, func() bool {
		named, _ = ucs[0].Get(ctx, script.NamedKey(key)).Result()
		return named != "" || len(got) > 0
	}, time.Second, time.Millisecond)
	if named != "" {
		require.Equal(t, "gone.x", named, "the release did not name the first in line")
	}
	select {
	case at := <-got:
		require.False(t, at.IsZero())
		t.Logf("c got the key %v after the release that named a gone waiter", at.Sub(start))
		require.Less(t, at.Sub(start), time.Second, "a gone waiter held the key up for more than one reservation and a poll")
	case <-time.After(5 * time.Second):
		t.Fatal("c never got the key that was reserved for a gone waiter")
	}
}

// A Lock call that gives up while a release has named it, with the key
// free, passes the reservation to the next in line for as long as a
// release would have reserved it, not for a moment.
func TestIntegrationANamedWaiterThatGivesUpPassesTheReservationOn(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a, b := wakeClient(t, ucs), wakeClient(t, ucs, slowRetry)
	key, la := heldKey(t, a)

	bctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() {
		_, err := b.Lock(bctx, key, 5*time.Second)
		gaveUp <- err
	}()
	var bID string
	require.Eventually(t, func() bool {
		for _, uc := range ucs {
			ids, err := uc.ZRange(ctx, script.QueueKey(key), 0, -1).Result()
			if err != nil || len(ids) != 1 {
				return false
			}
			bID = ids[0]
		}
		return true
	}, 3*time.Second, time.Millisecond, "b never joined the line")
	// Behind b: a waiter of another Client, listened to on its channel.
	ps := ucs[0].Subscribe(ctx, script.WakeChannel("next"))
	defer ps.Close()
	_, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	require.NoError(t, err)
	for _, uc := range ucs {
		require.NoError(t, uc.ZAdd(ctx, script.QueueKey(key), redis.Z{Score: float64(time.Now().UnixMicro()), Member: "next.x"}).Err())
	}
	// As if a's release had named b and b had not tried yet: the key is
	// free and reserved for b.
	for _, uc := range ucs {
		require.NoError(t, uc.ZRem(ctx, script.QueueKey(key), bID).Err())
		require.NoError(t, uc.Set(ctx, script.NamedKey(key), bID, 5*time.Second).Err())
	}
	for _, uc := range ucs {
		require.NoError(t, uc.Del(ctx, key).Err()) // a's lease is left to expire unused
	}
	_ = la
	// b's rounds as if they took 500 ms: a release's reservation would then
	// be 2.5 s (half the ttl), long enough to read back on any machine.
	b.roundNs.Store(int64(500 * time.Millisecond))

	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled)
	m, err := ps.ReceiveTimeout(ctx, 3*time.Second)
	require.NoError(t, err, "the next in line was not told")
	require.Equal(t, "next.x|"+key, m.(*redis.Message).Payload)
	pttl, err := ucs[0].PTTL(ctx, script.NamedKey(key)).Result()
	require.NoError(t, err)
	named, _ := ucs[0].Get(ctx, script.NamedKey(key)).Result()
	require.Equal(t, "next.x", named, "the reservation does not name the next in line")
	require.Greater(t, pttl, time.Second, "the reservation passed on lasts only a moment")
}

// With one of three nodes frozen after the key was taken, a release still
// wakes the first in line through its Client's channel on the other two (a
// Client subscribes to its own channel before a key's, node by node, and a
// frozen node holds up only its own subscriber), and the waiter takes the
// key long before its 5 s retry.
func TestIntegrationAHandOffWorksWithAFrozenNode(t *testing.T) {
	nodes := testenv.RedisNodes(t, 3)
	ucs := testenv.Clients(t, nodes)
	ctx := context.Background()
	a := wakeClient(t, ucs, WithNodeTimeout(200*time.Millisecond))
	b := wakeClient(t, ucs, WithNodeTimeout(200*time.Millisecond),
		slowRetry)
	key, la := heldKey(t, a)
	// TryLock returns at two grants of three: wait for the third before
	// freezing node 2. Otherwise a's acquire could still be on its way to
	// node 1, b's first attempt could win node 1 before it, and b's own
	// cleanup would then name b there (a reservation, not the line), which
	// is correct but not what this test is about.
	requireHeldEverywhere(t, ucs, key)
	require.NoError(t, nodes[2].Pause())
	t.Cleanup(func() { _ = nodes[2].Resume() })
	got := make(chan error, 1)
	go func() {
		l, err := b.Lock(ctx, key, 5*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	requireLineLen(t, ucs[:2], key, 1, "b never joined the line on the live nodes")
	require.Eventually(t, func() bool {
		b.wake.mu.Lock()
		defer b.wake.mu.Unlock()
		kw := b.wake.waiters[key]
		return kw != nil && !kw.liveSince.IsZero()
	}, 3*time.Second, time.Millisecond, "b's subscription was never confirmed by the two live nodes")

	start := time.Now()
	require.NoError(t, la.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		require.Less(t, time.Since(start), 2*time.Second, "the waiter waited for its retry, not the release")
	case <-time.After(4 * time.Second):
		t.Fatal("the waiter was not woken by the release")
	}
}

// A notice on a Client's own channel is 'names|key'; a key may itself hold
// '|' and spaces (waiter ids hold neither), so the names end at the first
// '|'. A payload without one is not a notice and wakes nobody.
func TestWakerReadsKeysWithBarsAndSpacesFromItsOwnChannel(t *testing.T) {
	c, _ := newTestClient(t, 5)
	w := c.wake
	key := "a|b c"
	ch, unregister, _ := w.register(key, "w.1", time.Now())
	defer unregister()
	w.deliver(0, script.WakeChannel(w.id), "junk")
	select {
	case pos := <-ch:
		t.Fatalf("a payload without a key woke the waiter (position %d)", pos)
	default:
	}
	w.deliver(0, script.WakeChannel(w.id), "w.1|"+key)
	requireWake(t, ch, wakeFirst)
	w.deliver(0, script.ReleaseChannel(key), "w.1")
	requireWake(t, ch, wakeFirst)
}
