package redlock

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// named returns the attributes of the Debug records whose message is msg.
func (l *logs) named(msg string) []map[string]slog.Value {
	var out []map[string]slog.Value
	for _, r := range l.at(slog.LevelDebug, msg) {
		if r.Message == msg {
			out = append(out, recordAttrs(r))
		}
	}
	return out
}

func TestLogs_DebugLogsEachAcquisitionAndRelease(t *testing.T) {
	var log logs
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing(), WithLogger(log.logger()))
	ctx := context.Background()
	key := testenv.Key(t)
	cl.hold(t, key, 200*time.Millisecond, cl.all()...)
	l, err := c.Lock(ctx, key, time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NoError(t, l.Release(ctx))

	got := log.named("redlock: lock obtained")
	require.Len(t, got, 1)
	require.Equal(t, key, got[0]["key"].String())
	require.GreaterOrEqual(t, got[0]["attempts"].Int64(), int64(2), "the first attempt found the key held")
	require.Equal(t, l.FencingToken(), got[0]["token"].Uint64())
	require.Greater(t, got[0]["wait"].Duration(), time.Duration(0))

	not := log.named("redlock: lock not obtained")
	require.Len(t, not, 1)
	require.Equal(t, "held", not[0]["outcome"].String())
	require.Equal(t, int64(1), not[0]["attempts"].Int64())

	rel := log.named("redlock: lease released")
	require.Len(t, rel, 1)
	require.Equal(t, key, rel[0]["key"].String())
	require.NotContains(t, rel[0], "err")
}
