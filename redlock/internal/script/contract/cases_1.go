package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// cases1: cases of acquire.lua, release.lua.
var cases1 = []contractCase{
	// acquire.lua
	{name: "acquire/free key on an admitted node is ours", admitted: true,
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireTTLNear(t, n, ctKey, 5*time.Second)
		}},
	{name: "acquire/held key reports the other's ttl",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, int64(0), s[0])
			require.InDelta(t, 3000, s[1], 200)
			requireKey(t, n, ctKey, "theirs")
		}},
	{name: "acquire/unadmitted node refuses",
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(-1), int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "acquire/node admitted under other settings refuses and names them",
		setup:   func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctOther, 0) },
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(-2), int64(0), ctOther}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "acquire/tombstone of our value refuses",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.TombKey(ctValue), "1", time.Second)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(-3), int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "acquire/without the admission check an unadmitted node grants",
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
		}},
	{name: "acquire/fencing reads the fence and the server clock",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "12345678901234567", 0)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Fencing: true, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 5)
			require.Equal(t, []any{int64(1), int64(0), "12345678901234567"}, s[:3])
			us := s[3].(int64)*1_000_000 + s[4].(int64)
			require.InDelta(t, n.nowUs(t), us, 1e6)
		}},
	{name: "acquire/fencing on a held key still reads the fence",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Fencing: true, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 5)
			require.Equal(t, int64(0), s[0])
			require.Equal(t, "0", s[2])
		}},

	{name: "acquire/a Lock that fails on a held key joins the line",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			_, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.True(t, in, "the waiter is not in line")
			requireTTLNear(t, n, script.QueueKey(ctKey), 10*time.Second)
			requireKey(t, n, script.LinedKey(ctKey), "1")
			requireTTLNear(t, n, script.LinedKey(ctKey), 10*time.Second)
		}},
	{name: "acquire/a grant where the key has no line marker touches no line",
		admitted: true, line: []waiter{{id: "w1", ago: 10, seen: true}},
		setup: func(t *testing.T, n contractNode) {
			n.del(t, script.LinedKey(ctKey)) // as an older client's join leaves it
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireInLine(t, n, true, "w1")
		}},
	{name: "acquire/a free key with others in line but no reservation is taken (only a release holds it back)",
		admitted: true, line: []waiter{{id: "w0", ago: 0}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
		}},
	{name: "acquire/a waiter already in line takes a free key and leaves the line",
		admitted: true, line: []waiter{{id: "w0", ago: 10}, {id: "w1", ago: 0}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			_, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.False(t, in, "the winner is still in line")
			_, in = n.zscore(t, script.QueueKey(ctKey), "w0")
			require.True(t, in)
		}},
	{name: "acquire/a TryLock takes a free key past the line",
		admitted: true, line: []waiter{{id: "w0", ago: 0}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
		}},
	{name: "acquire/a stale waiter keeps no newcomer out",
		admitted: true, line: []waiter{{id: "stale", ago: 2 * ctLineMs * 1000}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err), "a stale waiter kept a newcomer out")
			requireKey(t, n, ctKey, ctValue)
		}},
	{name: "acquire/joining the line drops the waiters that stopped trying",
		admitted: true, held: holding{"theirs", 3 * time.Second}, line: []waiter{{id: "stale", ago: 2 * ctLineMs * 1000}, {id: "w0", ago: 10}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			requireInLine(t, n, false, "stale")
			requireInLine(t, n, true, "w0", "w1")
		}},
	// A waiter's stay in line ends when the node has not seen it (a join,
	// a release script's "back in place") for the line's lifetime, not
	// when its call began that long ago: a call that keeps trying keeps
	// its place however long it waits. The entries above without a last
	// sight are an older client's, which still go by their place.
	{name: "acquire/joining keeps a waiter whose call began long ago but was seen lately, in its place",
		admitted: true, held: holding{"theirs", 3 * time.Second}, line: []waiter{{id: "old", ago: 2 * ctLineMs * 1000, seen: true, seenAgo: 1000}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			requireInLine(t, n, true, "old", "w1")
			place, _ := n.zscore(t, script.QueueKey(ctKey), "old")
			require.InDelta(t, n.nowUs(t)-2*ctLineMs*1000, place, 1e6, "the old call's place")
			requireSeen(t, n, true, "w1")
			requireTTLNear(t, n, script.SeenKey(ctKey), time.Duration(ctLineMs)*time.Millisecond)
		}},
	{name: "acquire/joining drops a waiter not seen for the line's lifetime, whenever its call began",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		// gone's place is recent (a Client whose clock runs ahead)
		line:    []waiter{{id: "gone", ago: 10, seen: true, seenAgo: ctLineMs*1000 + 1000}, {id: "w0", ago: 20, seen: true, seenAgo: 1000}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			requireInLine(t, n, false, "gone")
			requireSeen(t, n, false, "gone")
			requireInLine(t, n, true, "w0", "w1")
		}},
	{name: "acquire/a failed attempt keeps its call's place and notes that it was seen",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			now := n.nowUs(t)
			waiting(t, n, "w1", 777, now-ctLineMs*1000/2)
		},
		args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Place: 777, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			place, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.True(t, in)
			require.Equal(t, int64(777), place)
			requireSeen(t, n, true, "w1")
		}},
	{name: "acquire/a grant takes the call's last sight out of the line with it",
		admitted: true, line: []waiter{{id: "w0", ago: 20, seen: true}, {id: "w1", ago: 10, seen: true}},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireInLine(t, n, false, "w1")
			requireSeen(t, n, false, "w1")
			requireInLine(t, n, true, "w0")
			requireSeen(t, n, true, "w0")
		}},

	// release.lua
	{name: "release/names the first in line alone, and the releaser leaves it",
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "me", ago: 30}, {id: "w2", ago: 10}, {id: "w1", ago: 20}, {id: "w3", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "w1")
			requireTTLNear(t, n, script.NamedKey(ctKey), 3*time.Second)
			// the named leaves the line: a waiter that is gone would be
			// named again and again
			requireInLine(t, n, false, "me", "w1")
			requireInLine(t, n, true, "w2", "w3")
		}},
	{name: "release/names no waiter that stopped trying",
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "stale1", ago: 2 * ctLineMs * 1000}, {id: "stale2", ago: 2*ctLineMs*1000 - 1}, {id: "w1", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "w1")
			requireInLine(t, n, false, "stale1", "stale2")
		}},
	{name: "release/a line of stale waiters names nobody",
		published: []string{""},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "stale", ago: 2 * ctLineMs * 1000}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, script.NamedKey(ctKey))
		}},
	{name: "release/names the call that has waited longest when it was seen lately",
		published: []string{"old"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "old", ago: 2 * ctLineMs * 1000, seen: true, seenAgo: 1000}, {id: "w1", ago: 10, seen: true, seenAgo: 1000}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "old")
			requireInLine(t, n, false, "old")
			requireSeen(t, n, false, "old")
			requireInLine(t, n, true, "w1")
		}},
	{name: "release/names no waiter that was not seen for the line's lifetime",
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "gone", ago: 20, seen: true, seenAgo: ctLineMs*1000 + 1000}, {id: "w1", ago: 10, seen: true, seenAgo: 1000}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "w1")
			requireInLine(t, n, false, "gone", "w1")
			requireSeen(t, n, false, "gone", "w1")
		}},
	{name: "release/a call that leaves takes its last sight out of the line with it",
		published: []string{},
		held:      holding{"theirs", 5 * time.Second}, line: []waiter{{id: "me", ago: 20, seen: true}, {id: "w1", ago: 10, seen: true}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "me", Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireInLine(t, n, false, "me")
			requireSeen(t, n, false, "me")
			requireSeen(t, n, true, "w1")
		}},
	{name: "release/the notice goes to the named waiter's Client alone, not to the key's channel",
		told:      map[string][]string{"c1": {"c1.a|" + ctKey}, "c2": nil},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a", ago: 30}, {id: "c1.b", ago: 20}, {id: "c2.x", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "c1.a")
		}},
	{name: "release/a named waiter of an older client is told on the key's channel",
		told:      map[string][]string{"c1": nil},
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 30}, {id: "c1.a", ago: 20}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
		}},
	{name: "acquire/a key that already holds our value is ours (a retried call whose first run took it)",
		admitted: true, held: holding{ctValue, 3 * time.Second},
		args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireTTLNear(t, n, ctKey, 3*time.Second) // the first run's expiry: the lease counts from before it
		}},
	{name: "acquire/a reservation lets only the named waiters in",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "w1 w2", 3*time.Second)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w3", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, int64(-4), s[0])
			require.InDelta(t, 3000, s[1], 200, "the reservation's pttl")
			requireNoKey(t, n, ctKey)
			_, in := n.zscore(t, script.QueueKey(ctKey), "w3")
			require.True(t, in, "a refused Lock joins the line")
		}},
	{name: "acquire/a reservation keeps a TryLock out too",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "w1", 3*time.Second)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(-4), slice(t, res, err)[0])
			requireNoKey(t, n, ctKey)
		}},
	{name: "acquire/a named waiter takes the key and ends the reservation",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "w1 w2", 3*time.Second)
			n.zadd(t, script.QueueKey(ctKey), "w2", 5)
		},
		args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w2", Place: 5, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireNoKey(t, n, script.NamedKey(ctKey))
			_, in := n.zscore(t, script.QueueKey(ctKey), "w2")
			require.False(t, in)
		}},
	{name: "acquire/a waiter's place is the one it gives, the same on every node",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Place: -777, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			score, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.True(t, in)
			require.InDelta(t, n.nowUs(t)-777, score, 500_000)
		}},
}
