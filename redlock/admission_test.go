package redlock

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// From a red-team review: a failed attempt decides at the third refusal,
// and a wiped node whose "not admitted" reply came after that never had
// its quarantine started: the attempt cancelled its round, so the late
// reply became "context canceled", and nothing looked at late replies of
// failed attempts anyway. A waiter whose calls to the wiped node are
// always a little slower than the others' kept the node out for as long
// as it waited (docs/fencing.md, Liveness: a wiped node is re-admitted one
// quarantine after the first attempt that reaches it, also when its reply
// arrives after the decision).
func TestLock_AFailedAttemptStartsTheQuarantineOfANodeThatAnswersLate(t *testing.T) {
	rc := newRealCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 2 * time.Second
	var slow atomic.Bool
	late := func(i int, sc redis.Scripter) redis.Scripter {
		if i != 4 {
			return sc
		}
		return hookScripter{Scripter: sc, before: func(_ context.Context, script string, keys []string, _ []any) *redis.Cmd {
			if script == "acquire" && isTestKey(keys[0]) && slow.Load() {
				// Well after the other nodes' refusals decided the
				// attempt, well within the node timeout (100 ms).
				time.Sleep(50 * time.Millisecond)
			}
			return nil
		}}
	}
	h := rc.client(t, nil, nil, WithMaxTTL(maxTTL))
	w := rc.client(t, late, nil, WithMaxTTL(maxTTL), WithRetry(func(int) time.Duration { return 100 * time.Millisecond }, 0))
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)

	// The holder keeps the key for the whole test.
	hctx, stop := context.WithCancel(ctx)
	held := make(chan struct{})
	hdone := make(chan error, 1)
	go func() {
		hdone <- h.Do(hctx, key, maxTTL, func(fctx context.Context, _ *Lease) error {
			close(held)
			<-fctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		stop()
		<-hdone
	})
	select {
	case <-held:
	case <-time.After(3 * time.Second):
		t.Fatal("the holder never got the key")
	}
	requireHeldEverywhere(t, rc.universal(), key)

	rc.restartEmpty(t, 4)
	// Loaded, so that an attempt's call is one EVALSHA (one delay).
	require.NoError(t, acquireScript.Load(ctx, rc.raw[4]).Err())
	slow.Store(true)
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := w.Lock(lctx, key, maxTTL)
	require.ErrorIs(t, err, ErrNotObtained)
	require.Eventually(t, func() bool {
		n, err := rc.raw[4].Exists(ctx, script.PendingKey).Result()
		return err == nil && n == 1 || rc.admittedOn(t, 4)
	}, time.Second, 10*time.Millisecond, "the waiter's attempts reached the wiped node and never started its quarantine")
}
