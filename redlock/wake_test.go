package redlock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Waking Lock's waiters: the Pub/Sub notices a release sends, who hears
// them, and the waker that delivers them to waiting calls.

// idleWaker is the waker of a Client over three nodes that subscribes to
// nothing (WithoutReleaseNotify), for tests that drive it by hand.
func idleWaker(t *testing.T) (*Client, *waker) {
	t.Helper()
	c := newCluster(t, 3).client(t, WithoutReleaseNotify())
	return c, c.wake
}

// A release wakes a Lock call of the same Client at once: with a 10s
// retry delay only the release can explain a quick hand-off.
func TestWake_ALocalReleaseWakesTheWaiter(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithRetry(func(int) time.Duration { return 10 * time.Second }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		l2, err := c.Lock(ctx, key, 5*time.Second)
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	// The waiter failed and listens for the release (where it joined the
	// line is up to which of TryLock's calls landed first on a loaded
	// machine: it returned at a majority).
	require.Eventually(t, func() bool { return subscriptionLive(c, key) }, 3*time.Second, time.Millisecond, "the waiter never subscribed")
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
		require.Less(t, time.Since(released), 2*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken by the release")
	}
}

func TestWake_AReleaseByAnotherClientWakesTheWaiter(t *testing.T) {
	cl := newCluster(t, 5)
	// Polling alone would take 10s: only the release notification, sent
	// through Pub/Sub by another Client, can hand over quickly.
	holder, _ := cl.ready(t)
	waiter := cl.client(t, WithRetry(func(int) time.Duration { return 10 * time.Second }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	got := make(chan time.Time, 1)
	go func() {
		l2, err := waiter.Lock(ctx, key, 20*time.Second)
		if err == nil {
			got <- time.Now()
			_ = l2.Release(ctx)
		}
		close(got)
	}()
	// The waiter failed and listens for the release (where it joined the
	// line is up to which of TryLock's calls landed first on a loaded
	// machine: it returned at a majority).
	require.Eventually(t, func() bool { return subscriptionLive(waiter, key) }, 3*time.Second, time.Millisecond, "the waiter never subscribed")
	released := time.Now()
	require.NoError(t, l.Release(ctx))
	select {
	case at, ok := <-got:
		require.True(t, ok, "waiter failed")
		require.Less(t, at.Sub(released), 3*time.Second, "hand-off waited for the poll interval")
		_, open := <-got // closed once the waiter has released again
		require.False(t, open)
	case <-time.After(8 * time.Second):
		t.Fatal("waiter was not woken by the release")
	}

	// Cancellation: the error carries both causes.
	_, err = holder.TryLock(ctx, key, 20*time.Second)
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = waiter.Lock(cctx, key, 20*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.Canceled)
}

// A Lock call whose attempts win a minority of the nodes (another owner
// holds the key on the rest) puts itself back in line where it won, and
// is first in line there. Its cleanup must not wake it: it would try again
// at once, win the same nodes, clean up, wake itself, and so on, one
// attempt per round trip until the holder lets go, instead of waiting for
// the holder's release or its retry delay (docs/protocol.md, "A cleanup
// does not wake its own call").
func TestWake_ACleanupDoesNotWakeItsOwnCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"reservation", nil},
		{"key hand-off", []Option{WithKeyHandOff()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newCluster(t, 5)
			ctx := context.Background()
			const delay = 200 * time.Millisecond
			opts := append([]Option{WithNodeTimeout(200 * time.Millisecond),
				WithRetry(func(int) time.Duration { return delay }, 0)}, tc.opts...)
			c, f := cl.faulty(t, opts...)
			require.NoError(t, c.Bootstrap(ctx))
			key := testenv.Key(t)
			// Another owner holds nodes 0-2 for longer than the test, and
			// never releases: no notice is due, and nodes 3 and 4 are free.
			cl.hold(t, key, 30*time.Second, 0, 1, 2)
			const wait = time.Second
			lctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			f.reset()
			_, err := c.Lock(lctx, key, 5*time.Second)
			require.ErrorIs(t, err, ErrNotObtained)
			attempts := f.count("acquire", 3)
			// One attempt per retry delay, plus the one right after the
			// call subscribed to the key's notices; the rest is slack for
			// a loaded machine.
			most := int64(wait/delay) + 4
			require.LessOrEqual(t, attempts, most,
				"a Lock call that could not win sent %d attempts in %v with a %v retry delay", attempts, wait, delay)
			require.Positive(t, attempts)
			t.Logf("%d attempts", attempts)
		})
	}
}

// A release notice goes only to the Client whose waiter it names, on its
// own channel, and not to the key's channel, which every waiter of the key
// listens to: with 8 Clients waiting, a release used to make all of them
// read a notice that named 2.
func TestWake_ANoticeGoesToTheNamedClientsOnly(t *testing.T) {
	cl := newCluster(t, 3)
	ucs := cl.universal()
	ctx := context.Background()
	a, b, c, d := cl.client(t, slowRetry), cl.client(t, slowRetry), cl.client(t, slowRetry), cl.client(t, slowRetry)
	key, la := heldKey(t, a)

	// Listen on every node: a release publishes on the nodes where it
	// held the key, which need not include any one node.
	chans := []string{chanReleased(key), chanWake(b), chanWake(c), chanWake(d)}
	msgs := make(chan *redis.Message, 100)
	for _, uc := range ucs {
		ps := uc.Subscribe(ctx, chans...)
		t.Cleanup(func() { _ = ps.Close() })
		for range chans {
			_, err := ps.ReceiveTimeout(ctx, 5*time.Second) // the confirmations
			require.NoError(t, err)
		}
		go func() {
			for m := range ps.Channel() {
				msgs <- m
			}
		}()
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
		cl.requireLineLen(t, key, int64(i+1), "a waiter never joined the line on node 0", 0)
	}
	line := cl.line(t, 0, key)
	require.Len(t, line, 3)

	require.NoError(t, la.Release(ctx))
	// Listen until every waiter has had its turn and the channels have
	// been quiet for 300 ms since: on a loaded machine one turn can take
	// longer than that, so quiet alone does not mean the turns are over.
	heard := map[string][]string{}
	quiet := time.NewTimer(time.Hour)
	for finished := 0; ; {
		select {
		case msg := <-msgs:
			heard[msg.Channel] = append(heard[msg.Channel], msg.Payload)
			if finished == 3 {
				quiet.Reset(300 * time.Millisecond)
			}
			continue
		case err := <-done:
			require.NoError(t, err)
			if finished++; finished == 3 {
				quiet.Reset(300 * time.Millisecond)
			}
			continue
		case <-quiet.C:
		}
		break // every turn taken, then quiet for 300 ms
	}
	// Each release named the next in line alone, and told its Client only.
	// A Client may hear its waiter named more than once: an attempt that
	// split the nodes puts the call back in its place, and the cleanup's
	// release names it again.
	for i, w := range []*Client{b, c, d} {
		got := heard[chanWake(w)]
		require.NotEmpty(t, got, "waiter %d's Client was never told", i)
		for _, p := range got {
			require.Equal(t, script.Notice{Key: key, Names: line[i]}, wakeNotice(t, chanWake(w), p), "waiter %d's Client heard a notice for another", i)
		}
	}
	// The key's channel carries only "nobody is in line" (d's release,
	// after b and c had their turns, and any cleanup after it).
	for _, p := range heard[chanReleased(key)] {
		require.Empty(t, p, "a release that named waiters published on the key's channel")
	}
}

// A release names the first Lock call in line alone: the second makes no
// attempt while the first takes the key and holds it. Naming the first two
// made the second try one to two round trips later, in case the first was
// gone, and that attempt found the key taken at almost every hand-off:
// with 8 Clients on one key, a fifth of all Redis calls.
func TestWake_OnlyTheFirstInLine(t *testing.T) {
	cl := newCluster(t, 3)
	ctx := context.Background()
	a, b := cl.client(t), cl.client(t, slowRetry)
	c, calls := cl.faulty(t, slowRetry)
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
	cl.requireLineLen(t, key, 1, "b never joined the line")
	go func() {
		l, err := c.Lock(ctx, key, 5*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		done <- err
	}()
	cl.requireLineLen(t, key, 2, "c never joined the line")
	calls.requireAttempts(t, 2) // c's attempts on joining are over; its next waits 5 s

	calls.reset()
	l := releaseTo(t, la, lb)
	// Nothing wakes the second in line to wait on: its Client hears no
	// notice. So the check is that no call of it shows for 300 ms, and it
	// fails at the first one.
	require.Never(t, func() bool { return calls.total() != 0 }, 300*time.Millisecond, 5*time.Millisecond,
		"the second in line sent script calls while the first took and held the key")
	require.NoError(t, l.Release(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(3 * time.Second):
		t.Fatal("the second in line was not handed the key by the first's release")
	}
}

// With one of three nodes frozen after the key was taken, a release still
// wakes the first in line through its Client's channel on the other two (a
// Client subscribes to its own channel before a key's, node by node, and a
// frozen node holds up only its own subscriber), and the waiter takes the
// key long before its 5 s retry.
func TestWake_WorksWithAFrozenNode(t *testing.T) {
	cl := newCluster(t, 3)
	ctx := context.Background()
	a := cl.client(t, WithNodeTimeout(200*time.Millisecond))
	b := cl.client(t, WithNodeTimeout(200*time.Millisecond),
		slowRetry)
	key, la := heldKey(t, a)
	// TryLock returns at two grants of three: wait for the third before
	// freezing node 2. Otherwise a's acquire could still be on its way to
	// node 1, b's first attempt could win node 1 before it, and b's own
	// cleanup would then name b there (a reservation, not the line), which
	// is correct but not what this test is about.
	cl.requireHeld(t, key)
	cl.freeze(t, 2)
	got := make(chan error, 1)
	go func() {
		l, err := b.Lock(ctx, key, 5*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	cl.requireLineLen(t, key, 1, "b never joined the line on the live nodes", 0, 1)
	require.Eventually(t, func() bool { return subscriptionLive(b, key) }, 3*time.Second, time.Millisecond, "b's subscription was never confirmed by the two live nodes")

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

// A release notice that arrives after a waiter's failed attempt began but
// before the waiter registered is delivered at registration, with the
// waiter's place in it; the waiter may skip its extra attempt only when
// the subscription was live before the attempt began.
func TestWaker_DeliversANoticeThatCameBeforeRegistration(t *testing.T) {
	_, w := idleWaker(t)
	_, unregister, live := w.register("k", "early", time.Now())
	require.False(t, live, "a subscription nobody confirmed counted as live")
	w.mu.Lock()
	w.waiters["k"].liveSince = time.Now().Add(-time.Second) // as if a majority confirmed it
	w.mu.Unlock()
	unregister() // the key lingers, still subscribed
	keepLingering(t, w, "k")

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
func TestWaker_RegisterWithAHandOffAndANoticeDoesNotBlock(t *testing.T) {
	_, w := idleWaker(t)
	_, unregister, _ := w.register("k", "early", time.Now())
	w.mu.Lock()
	w.waiters["k"].liveSince = time.Now().Add(-time.Second) // as if a majority confirmed it
	w.mu.Unlock()
	unregister() // the key lingers, still subscribed
	keepLingering(t, w, "k")

	since := time.Now()
	w.handedBy(0, "k", "late", "srv") // a release handed node 0 to it before it registered
	w.notify("k", "")                 // and a release with nobody in line woke everyone
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
func TestWaker_KeepsAContendedKeySubscribedForAWhile(t *testing.T) {
	cl := newCluster(t, 3)
	ucs := cl.universal()
	c, _ := cl.ready(t, WithRetry(func(int) time.Duration { return 20 * time.Millisecond }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	other := cl.client(t)
	subscribed := func() bool {
		chans, err := ucs[0].PubSubChannels(ctx, "*").Result()
		if err != nil {
			return false
		}
		return slices.Contains(chans, chanReleased(key))
	}
	go func() {
		// Released once other waits for it, with node 0 (the one looked
		// at below) subscribed too: live takes a majority, and on a
		// loaded machine node 0 was once not among it.
		assert.Eventually(t, func() bool { return subscriptionLive(other, key) && subscribed() }, 3*time.Second, time.Millisecond, "other never subscribed")
		_ = l.Release(ctx)
	}()
	l2, err := other.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
	require.True(t, subscribed(), "the key was unsubscribed as soon as its waiter left")
	require.Eventually(t, func() bool { return !subscribed() }, linger+3*time.Second, 50*time.Millisecond,
		"the key stayed subscribed past linger")
}

// A waiter that has not read its wake-up yet gets the newest notice's
// position, not the first one's: a release that names it first after an
// older one named it second must not leave it waiting a round trip or two
// as the second in line, while the reservation for it runs. And a notice
// that came before an attempt began is answered by that attempt.
func TestWaker_KeepsTheNewestNotice(t *testing.T) {
	_, w := idleWaker(t)
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
func TestWaker_KeepsTheNewestNoticeOverPubSub(t *testing.T) {
	cl := newCluster(t, 3)
	ucs := cl.universal()
	c := cl.client(t)
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
	require.NoError(t, ucs[0].Publish(ctx, chanReleased(key), "other w").Err())
	require.NoError(t, ucs[0].Publish(ctx, chanReleased(key), "w other").Err())
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
func TestWaker_RegisterWithAHandOffAndANoticeDoesNotBlockOverPubSub(t *testing.T) {
	cl := newCluster(t, 3)
	ucs := cl.universal()
	c := cl.client(t, WithKeyHandOff())
	key := testenv.Key(t)
	w := c.wake
	_, unregister, _ := w.register(key, "early", time.Now())
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return !w.waiters[key].liveSince.IsZero()
	}, 5*time.Second, 10*time.Millisecond, "the subscription was never confirmed by a majority")
	unregister() // the key lingers, still subscribed
	keepLingering(t, w, key)

	ctx := context.Background()
	since := time.Now()
	late := w.id + ".late"
	require.NoError(t, ucs[0].Publish(ctx, chanWake(c), handOffNotice(t, late, ucs[0].Get(ctx, keyIdent).Val(), key)).Err())
	require.NoError(t, ucs[1].Publish(ctx, chanReleased(key), "").Err())
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		kw := w.waiters[key]
		return kw != nil && kw.handed[late] != nil && kw.lastAt.After(since)
	}, 5*time.Second, 5*time.Millisecond, "the two notices never arrived")

	requireRegistersWith(t, w, key, late, since, wakePart)
}

// keepLingering keeps key, whose last waiter left, subscribed until the
// waker closes: its linger timer is stopped. A test that waits for
// notices to reach the lingering key must not lose it after linger (2 s),
// which a loaded machine reached and a CI run failed on.
func keepLingering(t *testing.T, w *waker, key string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	kw := w.waiters[key]
	require.NotNil(t, kw, "the key is not lingering")
	require.NotNil(t, kw.linger, "the key is not lingering")
	kw.linger.Stop()
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

// A notice on a Client's own channel is 'names|key'; a key may itself hold
// '|' and spaces (waiter ids hold neither), so the names end at the first
// '|'. A payload without one is not a notice and wakes nobody.
func TestWaker_ReadsKeysWithBarsAndSpacesFromItsOwnChannel(t *testing.T) {
	c, w := idleWaker(t)
	key := "a|b c"
	ch, unregister, _ := w.register(key, "w.1", time.Now())
	defer unregister()
	w.deliver(0, chanWake(c), "junk")
	select {
	case pos := <-ch:
		t.Fatalf("a payload without a key woke the waiter (position %d)", pos)
	default:
	}
	w.deliver(0, chanWake(c), "w.1|"+key)
	requireWake(t, ch, wakeFirst)
	w.deliver(0, chanReleased(key), "w.1")
	requireWake(t, ch, wakeFirst)
}

// A hand-off counts only from the server its node was verified on
// (identity.go): a notice from another server (a re-pointed name) or from
// one without an identity (it lost its data) counts for nothing, as a
// reply of an attempt does.
func TestWaker_AHandOffCountsOnlyFromTheServerItsNodeWasVerifiedOn(t *testing.T) {
	c, w := idleWaker(t)
	_, unregister, _ := w.register("k", "w", time.Now())
	defer unregister()
	w.handedBy(0, "k", "w", provenOn(c, 0))
	w.handedBy(1, "k", "w", provenOn(c, 2)) // node 2's server, through node 1's name
	w.handedBy(2, "k", "w", "")
	require.Equal(t, 1, w.handedTo("k", "w", make([]string, 3)))
	also := []string{"", provenOn(c, 1), ""} // node 1's attempt reply
	require.Equal(t, 2, w.handedTo("k", "w", also))
}
