package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// cases2: cases of release.lua, extend.lua, commit.lua.
var cases2 = []contractCase{
	{name: "release/a failed attempt's cleanup puts its Lock back in line, in its place",
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 20_000}, {id: "w2", ago: 10_000}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Back: true, Place: -1_000_000, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			// Back in its place, it is first: named, and so out of the
			// line again; w1 and w2 keep their places. It is not told
			// (nothing published): it has just lost this attempt.
			requireKey(t, n, script.NamedKey(ctKey), "me")
			requireInLine(t, n, false, "me")
			requireInLine(t, n, true, "w1", "w2")
			requireTTLNear(t, n, script.QueueKey(ctKey), time.Duration(ctLineMs)*time.Millisecond)
		}},
	{name: "release/a failed attempt's cleanup that is first in line tells nobody, on its Client's channel either",
		told:      map[string][]string{"c1": nil},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c2.w1", ago: 0}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "c1.me", Window: 3 * time.Second, Back: true, Place: -1_000_000, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "c1.me")
		}},
	{name: "release/a failed attempt's cleanup behind another in line names and tells that one",
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 2_000_000}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Back: true, Place: -1_000_000, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.NamedKey(ctKey), "w1")
			requireInLine(t, n, true, "me")
			requireInLine(t, n, false, "w1")
		}},
	// The cleanup sees the call now, so a call that began longer ago than
	// the line's lifetime is back in its place all the same: first, and
	// kept for without a notice (it used to be dropped there, named
	// nobody, and lost its place to every newer call).
	{name: "release/a failed attempt's cleanup puts back a call that began long ago, and tells nobody",
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 10, seen: true}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Back: true, Place: -(ctLineMs + 1000) * 1000, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireKey(t, n, script.NamedKey(ctKey), "me")
			requireInLine(t, n, false, "me")
			requireInLine(t, n, true, "w1")
		}},
	{name: "release/a failed attempt's cleanup behind another notes that its call was seen",
		published: []string{"w1"},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 2*ctLineMs*1000 + 1, seen: true}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Back: true, Place: -2 * ctLineMs * 1000, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireKey(t, n, script.NamedKey(ctKey), "w1")
			requireInLine(t, n, true, "me")
			requireSeen(t, n, true, "me")
			requireTTLNear(t, n, script.SeenKey(ctKey), time.Duration(ctLineMs)*time.Millisecond)
		}},
	{name: "release/a call that leaves drops out of a reservation that names it",
		published: []string{},
		held:      holding{"theirs", 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "w1 me w2", 3*time.Second)
			n.zadd(t, script.QueueKey(ctKey), "me", 5)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "me", Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "theirs")
			requireKey(t, n, script.NamedKey(ctKey), "w1 w2")
			requireTTLNear(t, n, script.NamedKey(ctKey), 3*time.Second)
			_, in := n.zscore(t, script.QueueKey(ctKey), "me")
			require.False(t, in)
		}},
	{name: "release/a reservation for the leaving call alone ends, quietly with nobody in line",
		published: []string{},
		setup:     func(t *testing.T, n contractNode) { n.put(t, script.NamedKey(ctKey), "me", 3*time.Second) },
		args:      script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "me", Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireNoKey(t, n, script.NamedKey(ctKey))
		}},
	{name: "release/a named call that gives up passes the free key to the next in line",
		told:      map[string][]string{"c2": {"c2.w1|" + ctKey}},
		published: []string{},
		line:      []waiter{{id: "c2.w1", ago: 10}, {id: "c2.w2", ago: 0}},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "c1.me", 3*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "c1.me", Window: 2 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, ctKey)
			requireKey(t, n, script.NamedKey(ctKey), "c2.w1")
			requireTTLNear(t, n, script.NamedKey(ctKey), 2*time.Second)
			_, in := n.zscore(t, script.QueueKey(ctKey), "c2.w2")
			require.True(t, in)
		}},
	{name: "release/a named call that gives up while another holds the key names nobody",
		published: []string{},
		held:      holding{"theirs", 5 * time.Second}, line: []waiter{{id: "w1", ago: 0}},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "me", 3*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "me", Window: 2 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireKey(t, n, ctKey, "theirs")
			requireNoKey(t, n, script.NamedKey(ctKey))
			_, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.True(t, in)
		}},
	{name: "release/our key is deleted, and with no line here nobody is told", published: []string{},
		held: holding{ctValue, 5 * time.Second},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, script.TombKey(ctValue))
		}},
	{name: "release/a line marker over an empty line tells every waiter of the key, and goes", published: []string{""},
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.LinedKey(ctKey), "1", 5*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, script.LinedKey(ctKey))
		}},
	{name: "release/a line without its marker is not looked at", published: []string{},
		held: holding{ctValue, 5 * time.Second}, line: []waiter{{id: "w1", ago: 0}},
		setup: func(t *testing.T, n contractNode) {
			n.zadd(t, script.SeenKey(ctKey), "w1", n.nowUs(t))
			n.del(t, script.LinedKey(ctKey)) // as an older client's join leaves it
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, script.NamedKey(ctKey))
			_, in := n.zscore(t, script.QueueKey(ctKey), "w1")
			require.True(t, in, "the waiter left the line")
		}},
	{name: "release/another's key stays and our value gets a tombstone", published: []string{},
		held: holding{"theirs", 5 * time.Second},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 3 * time.Second, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "theirs")
			requireKey(t, n, script.TombKey(ctValue), "1")
			requireTTLNear(t, n, script.TombKey(ctValue), 3*time.Second)
		}},
	{name: "release/a missing key leaves a tombstone",
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 3 * time.Second, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, script.TombKey(ctValue), "1")
		}},
	{name: "release/tombstone ttl 0 leaves none",
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Window: 50 * time.Millisecond, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.TombKey(ctValue))
		}},

	// extend.lua
	{name: "extend/our key gets the longer ttl",
		held: holding{ctValue, time.Second},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, 8*time.Second)
		}},
	{name: "extend/a shorter ttl never shortens our key",
		held: holding{ctValue, 8 * time.Second},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, 8*time.Second)
		}},
	{name: "extend/another's key is left alone",
		held: holding{"theirs", time.Second},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, "theirs")
			requireTTLNear(t, n, ctKey, time.Second)
		}},
	{name: "extend/a missing key is not brought back",
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/with the node's marker given, our key on an admitted node is renewed",
		admitted: true, held: holding{ctValue, time.Second},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, 8*time.Second)
		}},
	{name: "extend/a node a reconfiguration marked renews nothing",
		held: holding{ctValue, time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireTTLNear(t, n, ctKey, time.Second)
		}},
	{name: "extend/a retired node renews nothing",
		held: holding{ctValue, time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Retired(ctOther), 0)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, time.Second)
		}},
	{name: "extend/a lease named for re-creation gets its key back on a node admitted with our settings",
		admitted: true,
		args:     []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireTTLNear(t, n, ctKey, 8*time.Second)
		}},
	{name: "extend/a lease not named is not re-created",
		admitted: true,
		args:     []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/a node in quarantine re-creates nothing",
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/a node admitted with other settings re-creates nothing",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctOther, 0) },
		args:  []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/a node a reconfiguration marked re-creates nothing",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, script.Moving(ctSettings), 0) },
		args:  []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/a tombstone of our value keeps the key from coming back",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.TombKey(ctValue), "1", time.Minute)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
		}},
	{name: "extend/re-creation never takes another's key",
		admitted: true, held: holding{"theirs", time.Second},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, "theirs")
			requireTTLNear(t, n, ctKey, time.Second)
		}},
	{name: "extend/a batch re-creates only the leases named, each with its own ttl",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, "a", "va", time.Second) // ours: renewed as ever
		},
		args: []script.ExtendArgs{{Key: "a", Value: "va", TTL: 5 * time.Second, Meta: true}, {Key: "b", Value: "vb", TTL: 2 * time.Second, Recreate: true}, {Key: "c", Value: "vc", TTL: 7 * time.Second, Recreate: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(1), int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, "a", 5*time.Second)
			requireTTLNear(t, n, "b", 2*time.Second)
			requireTTLNear(t, n, "c", 7*time.Second)
			requireKey(t, n, "c", "vc")
		}},
	{name: "extend/a batch renews each key on its own terms",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, "a", "va", time.Second)     // ours: lengthened
			n.put(t, "b", "vb", 9*time.Second)   // ours: already longer, kept
			n.put(t, "c", "theirs", time.Second) // not ours
		},
		args: []script.ExtendArgs{{Key: "a", Value: "va", TTL: 5 * time.Second}, {Key: "b", Value: "vb", TTL: 2 * time.Second}, {Key: "c", Value: "vc", TTL: 5 * time.Second}, {Key: "d", Value: "vd", TTL: 5 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(1), int64(0), int64(0)}, slice(t, res, err))
			requireTTLNear(t, n, "a", 5*time.Second)
			requireTTLNear(t, n, "b", 9*time.Second)
			requireTTLNear(t, n, "c", time.Second)
			requireKey(t, n, "c", "theirs")
			requireNoKey(t, n, "d")
		}},

	// commit.lua
	{name: "commit/raises a missing fence",
		held: holding{ctValue, 5 * time.Second},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.FenceKey(ctKey), "42")
			requireTTLNear(t, n, script.FenceKey(ctKey), 7*time.Second)
		}},
}
