package drivertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Subscription checks a Conn's Pub/Sub on its own: messages of the
// subscribed channels arrive, an unsubscribed channel's do not, and after
// the server restarted (the connection broke) a subscription change
// brings every channel back.
func Subscription(t *testing.T, dial Dial) {
	n := testenv.Redis(t)
	rc := n.Client(t)
	sub := dial(t, n.Addr(), "", "").Subscribe()
	t.Cleanup(func() { _ = sub.Close() })
	msgs := sub.Messages()
	ctx := ctxFor(t, 60*time.Second)
	require.NoError(t, sub.Subscribe(ctx, "a"))
	require.NoError(t, sub.Subscribe(ctx, "b"))
	// hears publishes on ch until a message of this call arrives (earlier
	// calls' messages may still come, and are passed over); a message sent
	// to the unsubscribed channel fails the test.
	calls := 0
	hears := func(ch string) {
		t.Helper()
		calls++
		payload := fmt.Sprintf("m%d", calls)
		deadline := time.Now().Add(10 * time.Second)
		for {
			require.NoError(t, rc.Publish(ctx, ch, payload).Err())
			select {
			case m := <-msgs:
				require.NotEqual(t, "unsubscribed", m.Payload, "a message of channel %s, unsubscribed", m.Channel)
				if m.Channel == ch && m.Payload == payload {
					return
				}
			case <-time.After(20 * time.Millisecond):
			}
			require.True(t, time.Now().Before(deadline), "no message on %s", ch)
		}
	}
	hears("a")
	hears("b")
	require.NoError(t, sub.Unsubscribe(ctx, "b"))
	require.Eventually(t, func() bool { return rc.PubSubNumSub(ctx, "b").Val()["b"] == 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, rc.Publish(ctx, "b", "unsubscribed").Err())
	hears("a")

	require.NoError(t, n.Restart(ctx))
	// The change that follows the break may fail while the server comes
	// back; one that succeeds has channel a back too.
	require.Eventually(t, func() bool { return sub.Subscribe(ctx, "c") == nil && rc.PubSubNumSub(ctx, "a").Val()["a"] > 0 },
		20*time.Second, 10*time.Millisecond, "no subscription after the restart")
	hears("a")
	hears("c")
}
