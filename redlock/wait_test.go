package redlock

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// What waiting Lock calls and failed attempts send to the nodes, on real
// redis-server processes.

// scriptCounts counts the calls of one script each node ran.
type scriptCounts struct {
	script string
	n      [5]atomic.Int64
}

// wrap counts sc's calls of the script on node i (an EVALSHA answered
// NOSCRIPT, sent again as EVAL, counts once), then runs them through next
// (nil: as they are).
func (sc *scriptCounts) wrap(i int, s redis.Scripter, next *hookScripter) redis.Scripter {
	h := hookScripter{Scripter: s}
	if next != nil {
		h.before = next.before
	}
	h.after = func(ctx context.Context, script string, keys []string, args []any, cmd *redis.Cmd) {
		if script == sc.script && isTestKey(keys[0]) && (cmd.Err() == nil || !isNoScript(cmd.Err())) {
			sc.n[i].Add(1)
		}
		if next != nil && next.after != nil {
			next.after(ctx, script, keys, args, cmd)
		}
	}
	return h
}

// A Lock call whose attempts win a minority of the nodes (another owner
// holds the key on the rest) puts itself back in line where it won, and
// is first in line there. Its cleanup must not wake it: it would try again
// at once, win the same nodes, clean up, wake itself, and so on, one
// attempt per round trip until the holder lets go, instead of waiting for
// the holder's release or its retry delay (docs/fencing.md, "A cleanup
// does not wake its own call").
func TestIntegrationACleanupDoesNotWakeItsOwnCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"reservation", nil},
		{"key hand-off", []Option{WithKeyHandOff()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRealCluster(t, 5)
			ctx := context.Background()
			counts := &scriptCounts{script: "acquire"}
			attempts := &counts.n[3]
			count := func(i int, sc redis.Scripter) redis.Scripter { return counts.wrap(i, sc, nil) }
			const delay = 200 * time.Millisecond
			opts := append([]Option{WithNodeTimeout(200 * time.Millisecond),
				WithRetry(func(int) time.Duration { return delay }, 0)}, tc.opts...)
			c := rc.client(t, count, nil, opts...)
			require.NoError(t, c.Bootstrap(ctx))
			key := testenv.Key(t)
			// Another owner holds nodes 0-2 for longer than the test, and
			// never releases: no notice is due, and nodes 3 and 4 are free.
			rc.hold(t, key, 30*time.Second, 0, 1, 2)
			const wait = time.Second
			lctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			_, err := c.Lock(lctx, key, 5*time.Second)
			require.ErrorIs(t, err, ErrNotObtained)
			// One attempt per retry delay, plus the one right after the
			// call subscribed to the key's notices; the rest is slack for
			// a loaded machine.
			most := int64(wait/delay) + 4
			require.LessOrEqual(t, attempts.Load(), most,
				"a Lock call that could not win sent %d attempts in %v with a %v retry delay", attempts.Load(), wait, delay)
			require.Positive(t, attempts.Load())
			t.Logf("%d attempts", attempts.Load())
		})
	}
}

// A failed attempt decides at the third refusal, before the other two
// nodes answer. Where such a late reply is a refusal, the node is settled
// (its script ran and did not take the key) and needs no release; where it
// is a grant, or an error that leaves the outcome unknown, it gets one
// (docs/fencing.md, "A release beats a late acquire"). Here nodes 3 and 4
// answer 50 ms late: their requests are on the wire when the attempt gives
// up, and their replies arrive.
func TestIntegrationAFailedAttemptReleasesWhereALateReplyGrantedOnly(t *testing.T) {
	for _, tc := range []struct {
		name string
		held []int // nodes another owner holds
		// nodes that must get the failed attempt's release, and whether
		// the late grants must be gone afterwards
		released []int
	}{
		{"late refusals", []int{0, 1, 2, 3, 4}, nil},
		{"late grants", []int{0, 1, 2}, []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRealCluster(t, 5)
			ctx := context.Background()
			counts := &scriptCounts{script: "release"}
			releases := &counts.n
			late := func(i int, sc redis.Scripter) redis.Scripter {
				return counts.wrap(i, sc, &hookScripter{
					before: func(ctx context.Context, script string, keys []string, args []any) *redis.Cmd {
						if script != "acquire" || i < 3 || !isTestKey(keys[0]) {
							return nil
						}
						time.Sleep(50 * time.Millisecond)
						// Sent before the attempt gave up: it runs and
						// answers, whatever the caller's ctx does now.
						return acquireScript.Run(context.WithoutCancel(ctx), sc, keys, args...)
					}})
			}
			c := rc.client(t, late, nil, WithNodeTimeout(300*time.Millisecond))
			require.NoError(t, c.Bootstrap(ctx))
			key := testenv.Key(t)
			rc.hold(t, key, 10*time.Second, tc.held...)
			_, err := c.TryLock(ctx, key, 5*time.Second)
			require.ErrorIs(t, err, ErrNotObtained)
			require.NoError(t, c.Close()) // waits for the attempt's cleanup
			for i := range 5 {
				want := int64(0)
				if slices.Contains(tc.released, i) {
					want = 1
				}
				require.Equal(t, want, releases[i].Load(), "release calls on node %d", i)
				if slices.Contains(tc.held, i) {
					require.Equal(t, "another-owner", rc.value(t, i, key), "node %d", i)
				} else {
					require.Empty(t, rc.value(t, i, key), "node %d kept the failed attempt's late grant", i)
				}
			}
		})
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
func TestLock_ALineLeaveWaitsForTheCleanupsOfBothTriesOfAnAttempt(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL = time.Second
	x := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	require.NoError(t, x.Bootstrap(ctx))
	rc.restartEmpty(t, 0)
	rc.restartEmpty(t, 1)
	rc.restartEmpty(t, 2)
	// x starts the wiped nodes' quarantine, then goes away before it
	// admits them.
	_, err := x.TryLock(ctx, "warm", maxTTL)
	require.Error(t, err)
	require.NoError(t, x.Close())
	for i := range 3 {
		require.False(t, rc.admittedOn(t, i))
	}
	key := testenv.Key(t)
	rc.hold(t, key, 30*time.Second, 0, 1, 2, 3)
	time.Sleep(maxTTL + 300*time.Millisecond) // the quarantine is over

	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	var acquires atomic.Int32
	var first atomic.Value // the first try's value
	var landed atomic.Bool
	hook := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 4 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(ctx context.Context, script string, keys []string, args []any) *redis.Cmd {
			if !isTestKey(keys[0]) {
				return nil
			}
			switch {
			case script == "acquire":
				switch acquires.Add(1) {
				case 1:
					// the first try: a late error (a connection that broke)
					first.Store(args[0])
					time.Sleep(30 * time.Millisecond)
					cmd := redis.NewCmd(ctx)
					cmd.SetErr(errors.New("connection reset by peer"))
					return cmd
				case 2:
					cmd := acquireScript.Run(ctx, sc, keys, args...)
					giveUp() // the second try is in: the call gives up
					return cmd
				}
			case script == "release" && args[0] == first.Load():
				// the first try's cleanup, "back in place", lands late
				time.Sleep(300 * time.Millisecond)
				cmd := releaseScript.Run(context.WithoutCancel(ctx), sc, keys, args...)
				landed.Store(true)
				return cmd
			}
			return nil
		}}
	}
	w := rc.client(t, hook, nil, WithMaxTTL(maxTTL), WithKeyHandOff())
	_, err = w.Lock(wctx, key, maxTTL)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, int32(2), acquires.Load(), "the call did not try twice")
	require.Eventually(t, func() bool { return landed.Load() }, 2*time.Second, time.Millisecond, "the first try's cleanup never reached node 4")
	time.Sleep(200 * time.Millisecond) // anything still on its way
	in, err := rc.raw[4].ZRange(ctx, script.QueueKey(key), 0, -1).Result()
	require.NoError(t, err)
	require.Empty(t, in, "node 4 has the call that gave up in its line")
}
