package contract

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// contractNode is the redis-server the cases run on, through the driver
// under test, with the reads and writes their setups and checks make.
type contractNode struct{ c driver.Conn }

func (n contractNode) do(t *testing.T, args ...any) any {
	t.Helper()
	v, err := n.c.Do(context.Background(), args...)
	require.NoError(t, err, "%v", args)
	return v
}

// put sets key to val, with no expiry for ttl 0.
func (n contractNode) put(t *testing.T, key, val string, ttl time.Duration) {
	t.Helper()
	if ttl > 0 {
		n.do(t, "set", key, val, "px", ttl.Milliseconds())
		return
	}
	n.do(t, "set", key, val)
}
func (n contractNode) putHash(t *testing.T, key string, fields map[string]string, ttl time.Duration) {
	t.Helper()
	n.do(t, "del", key)
	args := []any{"hset", key}
	for k, v := range fields {
		args = append(args, k, v)
	}
	n.do(t, args...)
	if ttl > 0 {
		n.do(t, "pexpire", key, ttl.Milliseconds())
	}
}
func (n contractNode) read(t *testing.T, key string) (string, bool) {
	t.Helper()
	v := n.do(t, "get", key)
	if v == nil {
		return "", false
	}
	s, ok := v.(string)
	require.True(t, ok, "GET %s: reply %T", key, v)
	return s, true
}
func (n contractNode) readHash(t *testing.T, key string) map[string]string {
	t.Helper()
	m := map[string]string{}
	switch v := n.do(t, "hgetall", key).(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			m[v[i].(string)] = v[i+1].(string)
		}
	case map[any]any:
		for k, x := range v {
			m[k.(string)] = x.(string)
		}
	case map[string]any:
		for k, x := range v {
			m[k] = x.(string)
		}
	default:
		t.Fatalf("HGETALL %s: reply %T", key, v)
	}
	return m
}

// ttlOf is key's remaining life; -2: no key, -1: no expiry (unscaled).
func (n contractNode) ttlOf(t *testing.T, key string) time.Duration {
	t.Helper()
	v, ok := n.do(t, "pttl", key).(int64)
	require.True(t, ok)
	if v < 0 {
		return time.Duration(v)
	}
	return time.Duration(v) * time.Millisecond
}

// probePayload is what listen publishes to learn that its subscription is
// in place; the messages it reports leave it out.
const probePayload = "contract-probe"

// listen starts collecting the payloads published on channel and
// returns a function that waits briefly and reports them.
func (n contractNode) listen(t *testing.T, channel string) func() []string {
	t.Helper()
	ctx := context.Background()
	sub := n.c.Subscribe()
	t.Cleanup(func() { _ = sub.Close() })
	require.NoError(t, sub.Subscribe(ctx, channel))
	msgs := sub.Messages()
	// The subscription is in place once a PUBLISH reaches a subscriber: a
	// driver may return from Subscribe before the server confirmed it.
	require.Eventually(t, func() bool {
		c, _ := n.do(t, "publish", channel, probePayload).(int64)
		return c > 0
	}, 5*time.Second, 5*time.Millisecond, "the subscription to %s never took", channel)
	return func() []string {
		var got []string
		for {
			select {
			case m, ok := <-msgs:
				if !ok {
					return got
				}
				if m.Channel == channel && m.Payload != probePayload {
					got = append(got, m.Payload)
				}
			case <-time.After(100 * time.Millisecond):
				return got
			}
		}
	}
}
func (n contractNode) zscore(t *testing.T, key, member string) (int64, bool) {
	t.Helper()
	switch v := n.do(t, "zscore", key, member).(type) {
	case nil:
		return 0, false
	case string:
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		return int64(f), true
	case float64:
		return int64(v), true
	default:
		t.Fatalf("ZSCORE %s: reply %T", key, v)
		return 0, false
	}
}
func (n contractNode) zadd(t *testing.T, key, member string, score int64) {
	t.Helper()
	n.do(t, "zadd", key, score, member)
	n.do(t, "pexpire", key, time.Minute.Milliseconds())
	if k, ok := strings.CutPrefix(key, queuePrefix); ok {
		// A line comes with its marker, as the scripts make it.
		n.put(t, script.LinedKey(k), "1", time.Minute)
	}
}

// queuePrefix is what QueueKey puts before a lock key.
var queuePrefix = strings.TrimSuffix(script.QueueKey("k"), "k")

func (n contractNode) del(t *testing.T, key string) {
	t.Helper()
	n.do(t, "del", key)
}
func (n contractNode) nowUs(t *testing.T) int64 {
	t.Helper()
	v, ok := n.do(t, "time").([]any)
	require.True(t, ok)
	require.Len(t, v, 2)
	var us [2]int64
	for i, x := range v {
		switch x := x.(type) {
		case int64:
			us[i] = x
		case string:
			var err error
			us[i], err = strconv.ParseInt(x, 10, 64)
			require.NoError(t, err)
		}
	}
	return us[0]*1_000_000 + us[1]
}
