package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// A key's line of waiting Lock calls on each node: who is in it, in which
// order, and that a call that gives up or dies leaves it.

// A Lock call that has waited longer than the line's lifetime (lineMs)
// keeps its place while it goes on trying: the nodes drop a waiter when
// they have not seen it for lineMs, not when its call began that long ago.
// This came from a red-team review: the scripts dropped places older than
// lineMs, so a call that waited longer was dropped at every join and at
// the holder's release, which named a newer call instead, and under
// steady contention from newer calls it was never served (with the
// defaults: any call waiting more than 2 minutes). The review's run, with
// a 10 s line: the holder kept the key for 11 s, the victim had called
// Lock first, two other Clients looped Lock / hold 150 ms / Release from
// 5.5 s on, and they won about 85 times in 24 s while the victim won
// none; a holder that let go after 7 s served the victim first. Scaled
// down here, in both modes.
func TestLine_ALongWaitingCallKeepsItsPlace(t *testing.T) {
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
			// New floors lineMs at 10 s; the test sets it on each Client
			// (package-internal, before any call) to 1.5 s, so that the
			// holder can keep the key past it in 2 s.
			const line = 1500 * time.Millisecond
			client := func() *Client {
				c := cl.client(t, tc.opts...)
				setLineLifetime(c, line)
				return c
			}
			h, v, c1, c2 := client(), client(), client(), client()
			require.NoError(t, h.Bootstrap(ctx))
			key := testenv.Key(t)
			const ttl = 5 * time.Second
			held, err := h.Lock(ctx, key, ttl)
			require.NoError(t, err)

			// The victim calls Lock first and waits, in line on every node.
			type result struct {
				l      *Lease
				err    error
				before int64 // the others' wins before the victim's
				at     time.Time
			}
			var wins atomic.Int64
			got := make(chan result, 1)
			vctx, vcancel := context.WithTimeout(ctx, line+4*time.Second)
			defer vcancel()
			go func() {
				l, err := v.Lock(vctx, key, ttl)
				got <- result{l: l, err: err, before: wins.Load(), at: time.Now()}
			}()

			// Two other Clients start looping while the holder still
			// holds the key, so they are in line behind the victim when
			// it lets go, and keep joining the line after it. Their
			// places are 2/3 of the line's lifetime old when the holder
			// lets go, the victim's 4/3: the old rule drops the victim
			// alone.
			time.Sleep(2 * line / 3)
			cctx, ccancel := context.WithCancel(ctx)
			var wg sync.WaitGroup
			defer func() {
				ccancel()
				wg.Wait()
			}()
			for _, c := range []*Client{c1, c2} {
				wg.Go(func() {
					for cctx.Err() == nil {
						l, err := c.Lock(cctx, key, ttl)
						if err != nil {
							continue
						}
						wins.Add(1)
						time.Sleep(50 * time.Millisecond)
						_ = l.Release(ctx)
					}
				})
			}

			// The holder lets go once the victim has waited longer than
			// the line's lifetime.
			time.Sleep(2 * line / 3)
			released := time.Now()
			require.NoError(t, held.Release(ctx))

			r := <-got
			ccancel()
			require.NoError(t, r.err, "the call that waited longest was never served while the others won %d times", wins.Load())
			require.Zero(t, r.before, "the others won %d times before the call that waited longest", r.before)
			t.Logf("served %v after the holder let go; the others had won %d times", r.at.Sub(released).Round(time.Millisecond), r.before)
			require.NoError(t, r.l.Release(ctx))
		})
	}
}

// A Lock call that gives up leaves the key's line on every node, so that
// the next release names a waiter that is still there.
func TestLine_ACallThatGivesUpLeavesIt(t *testing.T) {
	cl := newCluster(t, 5)
	a, _ := cl.ready(t)
	b := cl.client(t, WithRetry(func(int) time.Duration { return 20 * time.Millisecond }, 0))
	ctx := context.Background()
	key := testenv.Key(t)
	la, err := a.Lock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	defer la.Release(ctx)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = b.Lock(wctx, key, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Eventually(t, func() bool {
		for _, rc := range cl.raw {
			if n, err := rc.ZCard(ctx, keyLine(key)).Result(); err != nil || n > 0 {
				return false
			}
		}
		return true
	}, 2*time.Second, 5*time.Millisecond, "the Lock that gave up is still in the key's line")
}

// A waiter that crashed stays in the key's line (nothing took it out).
// The next release names it and reserves the key for it, but only once
// and only for the reservation's length: the key frees for the others,
// and the ghost is out of the line afterwards.
func TestLine_ACrashedWaiterHoldsTheKeyUpOnce(t *testing.T) {
	cl := newCluster(t, 5)
	a, _ := cl.ready(t)
	b := cl.client(t)
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := a.Lock(ctx, key, 2*time.Second)
	require.NoError(t, err)
	for _, rc := range cl.raw {
		require.NoError(t, rc.ZAdd(ctx, keyLine(key), redis.Z{Score: 1, Member: "ghost"}).Err())
		require.NoError(t, rc.Set(ctx, script.LinedKey(key), "1", time.Minute).Err()) // as its join left it
	}
	require.NoError(t, l.Release(ctx))
	start := time.Now()
	require.Eventually(t, func() bool {
		l, err := b.TryLock(ctx, key, 2*time.Second)
		if err != nil {
			return false
		}
		require.NoError(t, l.Release(ctx))
		return true
	}, 2*time.Second, 5*time.Millisecond, "the key stayed reserved for a waiter that is gone")
	t.Logf("free for others %v after the release that named the ghost", time.Since(start))
	// Release returns at a majority; the rest lands just after.
	for i, rc := range cl.raw {
		require.Eventually(t, func() bool {
			_, err := rc.ZScore(ctx, keyLine(key), "ghost").Result()
			return errors.Is(err, redis.Nil)
		}, 2*time.Second, 5*time.Millisecond, "node %d: the ghost is still in line", i)
	}
}

// From a red-team review: an attempt that finds nodes whose quarantine is
// over admits them and tries once more at once (tryAdmitting), and the
// first try's cleanup used to be dropped from what the call's line-leave
// waits for. Where that cleanup's "back in place" lands after the
// line-leave, it puts the call, gone by then, back in the node's line, and
// a later release there names an id nobody takes (with WithKeyHandOff,
// hands it the key for its ttl). Here nodes 0-2 were wiped and have served
// their quarantine, unadmitted; node 4's reply to the first try is a late
// error, and that try's cleanup reaches node 4 300 ms late, after the call
// gave up.
func TestLine_ALeaveWaitsForTheCleanupsOfBothTriesOfAnAttempt(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL = time.Second
	x := cl.client(t, WithMaxTTL(maxTTL))
	require.NoError(t, x.Bootstrap(ctx))
	cl.restartEmpty(t, 0)
	cl.restartEmpty(t, 1)
	cl.restartEmpty(t, 2)
	// x starts the wiped nodes' quarantine, then goes away before it
	// admits them.
	_, err := x.TryLock(ctx, "warm", maxTTL)
	require.Error(t, err)
	require.NoError(t, x.Close())
	for i := range 3 {
		require.False(t, cl.admittedOn(t, i))
	}
	key := testenv.Key(t)
	cl.hold(t, key, 30*time.Second, 0, 1, 2, 3)
	cl.requireQuarantineOver(t, 0, 1, 2)

	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	var acquires atomic.Int32
	var first atomic.Value // the first try's value
	var landed atomic.Bool
	w, f := cl.faulty(t, WithMaxTTL(maxTTL), WithKeyHandOff())
	f.before(func(ctx context.Context, c *call) error {
		if c.Node != 4 || !isTestKey(c.Keys[0]) {
			return nil
		}
		switch {
		case c.Script == "acquire":
			switch acquires.Add(1) {
			case 1:
				// the first try: a late error (a connection that broke)
				first.Store(c.Args[0])
				time.Sleep(30 * time.Millisecond)
				return errors.New("connection reset by peer")
			case 2:
				r := cl.replay(ctx, c)
				giveUp() // the second try is in: the call gives up
				return c.answer(r)
			}
		case c.Script == "release" && c.Args[0] == first.Load():
			// the first try's cleanup, "back in place", lands late
			time.Sleep(300 * time.Millisecond)
			r := cl.replay(context.WithoutCancel(ctx), c)
			landed.Store(true)
			return c.answer(r)
		}
		return nil
	})
	_, err = w.Lock(wctx, key, maxTTL)
	require.ErrorIs(t, err, context.Canceled)
	// On the production call path a third try can follow the second
	// before the call sees its ctx end; the first try's cleanup is what
	// this test holds back.
	require.GreaterOrEqual(t, acquires.Load(), int32(2), "the call did not try twice")
	require.Eventually(t, func() bool { return landed.Load() }, 2*time.Second, time.Millisecond, "the first try's cleanup never reached node 4")
	// The call's line-leave follows the cleanup: node 4's line empties,
	// and stays empty once every call the Client sent returned. A "back
	// in place" that landed after the leave would keep the call there
	// for the line's lifetime (10 s), past this wait.
	inLine := func() []string {
		in, err := cl.raw[4].ZRange(ctx, keyLine(key), 0, -1).Result()
		require.NoError(t, err)
		return in
	}
	require.Eventually(t, func() bool { return len(inLine()) == 0 }, 2*time.Second, time.Millisecond,
		"node 4 has the call that gave up in its line")
	f.requireIdle(t)
	require.Empty(t, inLine(), "node 4 has the call that gave up in its line")
}
