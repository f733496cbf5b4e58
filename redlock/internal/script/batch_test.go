package script

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
)

// Under load the batcher pipelines calls; every caller still gets its own
// call's reply, and a script that is not cached (NOSCRIPT) fails only the
// calls that used it.
func TestBatcher_RepliesUnderLoad(t *testing.T) {
	rc := testenv.Redis(t).Client(t)
	b := newBatcher(redisconn.New(rc), time.Second)
	ctx := context.Background()
	const callers, calls = 64, 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := range callers {
		wg.Go(func() {
			for i := range calls {
				want := fmt.Sprintf("%d-%d", g, i)
				got, err := asText(b.do(ctx, []any{"echo", want}))
				if err != nil || got != want {
					errs <- fmt.Errorf("caller %d call %d: got %q, %v; want %q", g, i, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Positive(t, b.batched.Load(), "64 callers and no call went in a pipeline")
	// Calls that queue while the pipeline is out leave together in the
	// next one: with 64 callers and at most maxDirect calls outside
	// pipelines, a pipeline carries many calls, not one or two.
	perPipe := float64(b.batched.Load()) / float64(b.pipelines.Load())
	t.Logf("%d calls in %d pipelines (%.1f each), %d direct", b.batched.Load(), b.pipelines.Load(), perPipe, callers*calls-int(b.batched.Load()))
	require.GreaterOrEqual(t, perPipe, 4.0, "pipelines carried %.1f calls each", perPipe)
	// A NOSCRIPT in a pipeline stays with its own call.
	var nos sync.WaitGroup
	for i := range 20 {
		nos.Go(func() {
			if i%2 == 0 {
				err := errOf(b.do(ctx, []any{"evalsha", "0000000000000000000000000000000000000000", 0}))
				if err == nil || !isNoScript(err) {
					t.Errorf("evalsha of an unknown script: %v, want NOSCRIPT", err)
				}
				return
			}
			if got, err := asText(b.do(ctx, []any{"echo", "x"})); err != nil || got != "x" {
				t.Errorf("echo among NOSCRIPTs: %q, %v", got, err)
			}
		})
	}
	nos.Wait()
}

// A call that left in a pipeline is no longer reachable from the
// batcher: its arguments, reply and ctx go with its caller. (The queue's
// slots behind its end kept them, for as long as no later burst
// overwrote them.)
func TestBatcher_KeepsNoCallItSent(t *testing.T) {
	rc := testenv.Redis(t).Client(t)
	b := newBatcher(redisconn.New(rc), time.Second)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 20 {
				if err := errOf(b.do(ctx, []any{"ping"})); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Positive(t, b.batched.Load(), "64 callers and no call went in a pipeline")
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Empty(t, b.queue)
	kept := 0
	for _, q := range b.queue[:cap(b.queue)] {
		if q != nil {
			kept++
		}
	}
	require.Zero(t, kept, "the queue's spare slots still hold %d calls already sent", kept)
}

// A frozen node: callers are bounded by their own ctx whether their call
// went out directly or waits in the queue, and the node works again once
// it thaws.
func TestBatcher_AFrozenNodeRespectsDeadlines(t *testing.T) {
	n, _, b := frozenBatcher(t, 3*maxDirect)
	var wg sync.WaitGroup
	for range 3 * maxDirect {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := errOf(b.do(ctx, []any{"ping"}))
			if err == nil {
				t.Error("a call to a frozen node succeeded")
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("a call with a 100ms deadline took %v on a frozen node", took)
			}
		})
	}
	wg.Wait()
	require.NoError(t, n.Resume())
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return errOf(b.do(ctx, []any{"ping"})) == nil
	}, 5*time.Second, 10*time.Millisecond, "the node did not answer after it thawed")
}

// One pipeline per node: a call that queues behind a pipeline stuck on a
// frozen node waits only as long as its own ctx, and, once its caller has
// given up, it is never sent, not even after the node thaws (a late
// acquire would only take a key its caller no longer counts).
func TestBatcher_ACallBehindAStuckPipelineIsNotSentLate(t *testing.T) {
	marker := testenv.Key(t)
	n, rc, b := frozenBatcher(t, maxDirect+maxPipes)
	long := fillFrozen(t, b)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := errOf(b.do(ctx, []any{"set", marker, "sent late"}))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second, "a call behind the stuck pipeline waited for the pipeline, not its own ctx")

	// A live call queues behind it, so the next pipeline after the thaw
	// holds both and is sent.
	fresh := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		fresh <- errOf(b.do(ctx, []any{"ping"}))
	}()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.queue) == 2
	}, time.Second, time.Millisecond, "the live call never queued behind the given-up one")

	require.NoError(t, n.Resume())
	long.Wait()
	require.NoError(t, <-fresh, "the call queued behind the stuck pipeline failed after the thaw")
	exists, err := rc.Exists(context.Background(), marker).Result()
	require.NoError(t, err)
	require.Zero(t, exists, "a call whose caller had given up was sent once the node thawed")
}

// A call sent with doUntil that is still queued when its caller gives up
// goes out once the node can take it, if its until has not passed (a
// release: the key it frees would otherwise wait out its ttl); one whose
// until has passed is left out like any other.
func TestBatcher_ACallWorthSendingLateGoesOutAfterTheThaw(t *testing.T) {
	marker := testenv.Key(t)
	n, rc, b := frozenBatcher(t, maxDirect+maxPipes)
	long := fillFrozen(t, b)

	for _, c := range []struct {
		key   string
		until time.Duration
	}{{marker + "-worth", time.Minute}, {marker + "-past", 50 * time.Millisecond}} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := errOf(b.doUntil(ctx, []any{"set", c.key, "sent late"}, time.Now().Add(c.until)))
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, c.key)
	}
	require.NoError(t, n.Resume())
	long.Wait()
	require.Eventually(t, func() bool {
		return rc.Exists(context.Background(), marker+"-worth").Val() == 1
	}, 5*time.Second, 5*time.Millisecond, "a call worth sending late was not sent after the thaw")
	// Both waited in the same queue: once it has drained, the other was
	// judged too, and sent with it if at all.
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.pipes == 0 && len(b.queue) == 0
	}, time.Second, time.Millisecond, "the queue did not drain")
	exists, err := rc.Exists(context.Background(), marker+"-past").Result()
	require.NoError(t, err)
	require.Zero(t, exists, "a call whose until had passed was sent once the node thawed")
}

// fillFrozen fills b's direct slots and its pipeline, on a frozen node,
// with calls that wait 1.5 s, so that the next calls queue; the group
// ends when they have.
func fillFrozen(t *testing.T, b *batcher) *sync.WaitGroup {
	t.Helper()
	long := &sync.WaitGroup{}
	for range maxDirect + 1 {
		long.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			_ = errOf(b.do(ctx, []any{"ping"}))
		})
	}
	require.Eventually(t, func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.direct == maxDirect && b.pipes == maxPipes && len(b.queue) == 0
	}, time.Second, time.Millisecond, "the long calls never filled the direct slots and the pipeline")
	return long
}

// frozenBatcher returns a batcher over a client of a new redis-server
// node that it then freezes (SIGSTOP; resumed when the test ends, if the
// test has not). The client bounds a direct call by its ctx (go-redis
// does so only with ContextTimeoutEnabled; redlock does not wait for its
// calls, but these tests do), and conns connections are opened before the
// freeze, since a new connection's handshake is never bounded by the ctx.
func frozenBatcher(t *testing.T, conns int) (*testenv.RedisNode, *redis.Client, *batcher) {
	t.Helper()
	n := testenv.Redis(t)
	rc := redis.NewClient(&redis.Options{Addr: n.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rc.Close() })
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			if err := rc.Do(context.Background(), "blpop", "warm-up", "0.05").Err(); !errors.Is(err, redis.Nil) {
				t.Errorf("warm-up: %v", err)
			}
		})
	}
	wg.Wait()
	require.NoError(t, n.Pause())
	t.Cleanup(func() { _ = n.Resume() }) // a second SIGCONT is harmless
	return n, rc, newBatcher(redisconn.New(rc), time.Second)
}

// errOf is the error of a call's reply.
func errOf(_ any, err error) error { return err }
