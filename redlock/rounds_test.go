package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestTryLock_ABurstOnManyKeysWaitsInTheClientNotInTheNodesQueues starts
// 8 x maxRounds TryLocks on distinct keys at once against nodes that take
// a fifth of the node timeout over every acquire batch. Queued in the
// nodes' batchers all at once, the calls beyond the first few batches
// would wait past the node timeout and fail, though every key is free
// (1,260 of 2,048 did; 1,291 under the race detector); with at most
// maxRounds rounds in flight the rest wait in the Client, before their
// attempt starts, and every one of them is granted. Each wave must fit in
// the node timeout's 0.6 left by two batches' delays, which under the race
// detector needs a longer timeout still.
func TestTryLock_ABurstOnManyKeysWaitsInTheClientNotInTheNodesQueues(t *testing.T) {
	// Each wave of maxRounds calls per node must fit in 0.6 of the
	// timeout; 300 ms was missed beside four busy loops (5 of 20 runs
	// without the race detector): a second.
	timeout := time.Second
	if raceDetector {
		timeout *= 3 // the hook's per-call work is many times slower
	}
	cl := newCluster(t, 5)
	c, f := cl.ready(t, WithNodeTimeout(timeout))
	f.delay(timeout/5, "acquire")
	ctx := context.Background()
	key := testenv.Key(t)
	n := 8 * maxRounds
	leases := make([]*Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = c.TryLock(ctx, fmt.Sprintf("%s:%d", key, i), time.Minute) })
	}
	wg.Wait()
	f.heal()
	failed, first := 0, error(nil)
	for i, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			continue
		}
		require.NoError(t, leases[i].Release(ctx))
	}
	require.Zerof(t, failed, "%d of %d TryLocks on free keys failed; the first: %v", failed, n, first)
}

// TestLock_AnUncontendedLockAndReleaseRunSixCommandsPerNode counts what
// one Lock and its Release run on each node (INFO commandstats, script
// calls and the commands inside them): the acquire script's EVALSHA, MGET
// and SET, the release script's EVALSHA, MGET and DEL. A key nobody waits
// for has no line marker, so neither script touches the line, and the
// release publishes nothing.
func TestLock_AnUncontendedLockAndReleaseRunSixCommandsPerNode(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	// The first calls load the scripts (NOSCRIPT, then EVAL): not counted.
	l, err := c.Lock(ctx, key+":warm", time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	waitCallsOver(t, f)
	for _, rc := range cl.raw {
		require.NoError(t, rc.ConfigResetStat(ctx).Err())
	}
	l, err = c.Lock(ctx, key, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	waitCallsOver(t, f)
	for i, rc := range cl.raw {
		stats, err := rc.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		total, by := 0, map[string]int{}
		for line := range strings.SplitSeq(stats, "\n") {
			name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
			if !ok || name == "info" || name == "hello" || strings.HasPrefix(name, "config") || strings.HasPrefix(name, "client") {
				continue // this test's own, and a new connection's handshake
			}
			n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
			require.NoError(t, err)
			total += n
			by[name] = n
		}
		require.LessOrEqualf(t, total, 6, "node %d ran %d commands for one Lock and Release: %v", i, total, by)
	}
}

// waitCallsOver waits until every script call the harness's clients sent
// has been answered.
func waitCallsOver(t *testing.T, f *faults) {
	t.Helper()
	require.Eventually(t, func() bool { return f.started.Load() == f.ended.Load() }, 5*time.Second, time.Millisecond,
		"script calls still out: %d started, %d ended", f.started.Load(), f.ended.Load())
}

// TestTryLock_FailedAttemptsGiveTheirRoundsBack: more failed attempts than
// there are rounds in flight, one after the other, each gives its slot
// back once its calls are over, so the next lock is not kept waiting for
// one that never frees.
func TestTryLock_FailedAttemptsGiveTheirRoundsBack(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t)
	ctx := context.Background()
	key := testenv.Key(t)
	held, err := c.TryLock(ctx, key, 10*time.Second)
	require.NoError(t, err)
	// A bounded ctx, so that a slot that never frees fails the test with
	// ReasonCancelled instead of hanging it.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for range maxRounds + 10 {
		_, err := c.TryLock(wctx, key, 10*time.Second)
		require.True(t, IsHeld(err), "not refused as held: %v", err)
	}
	l, err := c.TryLock(wctx, key+":other", 10*time.Second)
	require.NoError(t, err, "a lock on a free key after %d failed attempts", maxRounds+10)
	require.NoError(t, l.Release(ctx))
	require.NoError(t, held.Release(ctx))
}
