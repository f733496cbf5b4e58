package redlock

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// logLines is a slog handler's output, safe to write from the client's
// goroutines, read as JSON records.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logLines) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// named returns the records whose msg is msg.
func (b *logLines) named(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	dec := json.NewDecoder(bytes.NewReader(b.buf.Bytes()))
	for dec.More() {
		var rec map[string]any
		require.NoError(t, dec.Decode(&rec))
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func TestLogs_DebugLogsEachAcquisitionAndRelease(t *testing.T) {
	var lines logLines
	logger := slog.New(slog.NewJSONHandler(&lines, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing(), WithLogger(logger))
	ctx := context.Background()
	key := testenv.Key(t)
	cl.hold(t, key, 200*time.Millisecond, cl.all()...)
	l, err := c.Lock(ctx, key, time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, l.Release(ctx))

	got := lines.named(t, "redlock: lock obtained")
	require.Len(t, got, 1)
	require.Equal(t, key, got[0]["key"])
	require.GreaterOrEqual(t, got[0]["attempts"], float64(2), "the first attempt found the key held")
	require.Equal(t, float64(l.FencingToken()), got[0]["token"])
	require.Greater(t, got[0]["wait"], float64(0)) // nanoseconds in slog's JSON

	not := lines.named(t, "redlock: lock not obtained")
	require.Len(t, not, 1)
	require.Equal(t, "held", not[0]["outcome"])
	require.Equal(t, float64(1), not[0]["attempts"])

	rel := lines.named(t, "redlock: lease released")
	require.Len(t, rel, 1)
	require.Equal(t, key, rel[0]["key"])
	require.NotContains(t, rel[0], "err")
}
