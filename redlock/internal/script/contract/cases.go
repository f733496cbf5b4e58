package contract

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

type contractCase struct {
	name string
	// published, when not nil, is what the script must publish on
	// ReleaseChannel(ctKey).
	published []string

	// The common setups, made before setup runs: the node admitted with
	// ctSettings, ctKey held, and waiters in its line.
	admitted bool
	held     holding
	line     []waiter
	// told, when not nil, is what the release must tell each Client (by
	// id) on its own notice channel (WakeChannel); nil for nothing.
	told  map[string][]string
	setup func(t *testing.T, n contractNode)
	// args is the call, as the client builds it: AcquireArgs,
	// ReleaseArgs, CommitArgs, []ExtendArgs (with ctSettings for the
	// leases to re-create), MetaArgs, PendingArgs, AdmitArgs, ClaimArgs,
	// ClaimedArgs, ReconfigureArgs, or the Request of a call that takes
	// no arguments struct (IdentRequest, StateRequest). The scripts' KEYS
	// and ARGV come from the package's call builders, so that a case
	// sends what a Client sends, in the order it sends it.
	args any
	// fromNow: the Place of args (AcquireArgs, ReleaseArgs) counts µs
	// from the node's clock when the call is made, as the place of a
	// Lock call that began then.
	fromNow bool
	check   func(t *testing.T, n contractNode, res any, err error)
}

// holding is a value that holds ctKey, for ttl; "" for none.
type holding struct {
	value string
	ttl   time.Duration
}

// waiter is a Lock call in ctKey's line, its place ago µs before now on
// the node's clock; with seen, also its last sight, seenAgo µs before now
// (an older client's entry has none).
type waiter struct {
	id      string
	ago     int64
	seen    bool
	seenAgo int64
}

// Fixtures shared by the cases.
var (
	ctSettings = "v1 nodes=5 maxttl=1000ms drift=0.01"
	ctOther    = "v1 nodes=5 maxttl=200ms drift=0.01"
	ctThird    = "v1 nodes=3 maxttl=1000ms drift=0.01"
	ctKey      = "k"
	ctValue    = "ours"
	// ctServer is the server identity runContract gives the node (see
	// identReplies).
	ctServer = "server-1"
	ctLine   = 10 * time.Second
	ctLineMs = ctLine.Milliseconds()
	ctQuar   = 500 * time.Millisecond
	ctQuarUs = ctQuar.Microseconds()
)

// noIdent takes the server's identity away, as a loss of its data does.
func noIdent(t *testing.T, n contractNode) {
	t.Helper()
	n.del(t, script.IdentKey)
}

func admitted(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctSettings, 0) }

// pendingAged writes a pending mark stamped age ago on the node's clock.
func pendingAged(id, sett string, age time.Duration) func(*testing.T, contractNode) {
	return func(t *testing.T, n contractNode) {
		stamp := n.nowUs(t) - age.Microseconds()
		n.putHash(t, script.PendingKey, map[string]string{"id": id, "stamp": strconv.FormatInt(stamp, 10),
			"settings": sett, "quarantine": strconv.FormatInt(ctQuarUs, 10)}, time.Minute)
	}
}

// ctRecord is the change record of the reconfiguration from ctSettings to
// ctOther the contract tests run; ctElse another change's.
var (
	ctRecord = script.ChangeRecord(ctSettings, ctOther, []string{"n1", "n2"})
	ctElse   = script.ChangeRecord(ctSettings, ctOther, []string{"n1", "n3"})
)

// holdingOff is a node reconfiguring from ctSettings to ctOther whose
// hold-off of ctQuarUs was stamped age ago.
func holdingOff(age time.Duration) func(*testing.T, contractNode) {
	return func(t *testing.T, n contractNode) {
		stamp := n.nowUs(t) - age.Microseconds()
		n.putHash(t, script.PendingKey, map[string]string{"id": "hold1", "stamp": strconv.FormatInt(stamp, 10),
			"settings": ctOther, "quarantine": strconv.FormatInt(ctQuarUs, 10), "reconfigure": "1"}, time.Minute)
		n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
		n.put(t, script.TraceKey, ctRecord, 0)
	}
}

func atoiT(t *testing.T, s string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(s, 10, 64)
	require.NoError(t, err)
	return v
}

func slice(t *testing.T, res any, err error) []any {
	t.Helper()
	require.NoError(t, err)
	s, ok := res.([]any)
	require.True(t, ok, "reply %#v is not an array", res)
	return s
}

// requireInLine checks that each of ws is in the key's line (in true) or
// not (in false).
func requireInLine(t *testing.T, n contractNode, in bool, ws ...string) {
	t.Helper()
	for _, w := range ws {
		_, got := n.zscore(t, script.QueueKey(ctKey), w)
		require.Equal(t, in, got, "%s in line", w)
	}
}

// requireSeen checks that w's last sight in the key's line is now on the
// node's clock (within a second), or, with now false, that it has none.
func requireSeen(t *testing.T, n contractNode, now bool, ws ...string) {
	t.Helper()
	for _, w := range ws {
		at, got := n.zscore(t, script.SeenKey(ctKey), w)
		require.Equal(t, now, got, "%s has a last sight", w)
		if now {
			require.InDelta(t, n.nowUs(t), at, 1e6, "%s's last sight", w)
		}
	}
}

// waiting puts w in the key's line at place, last seen at seen (both us
// on the node's clock).
func waiting(t *testing.T, n contractNode, w string, place, seen int64) {
	n.zadd(t, script.QueueKey(ctKey), w, place)
	n.zadd(t, script.SeenKey(ctKey), w, seen)
}

func requireKey(t *testing.T, n contractNode, key, want string) {
	t.Helper()
	v, ok := n.read(t, key)
	require.True(t, ok, "%s is missing", key)
	require.Equal(t, want, v, key)
}

func requireNoKey(t *testing.T, n contractNode, key string) {
	t.Helper()
	v, ok := n.read(t, key)
	require.False(t, ok, "%s holds %q", key, v)
}

func requireTTLNear(t *testing.T, n contractNode, key string, want time.Duration) {
	t.Helper()
	got := n.ttlOf(t, key)
	require.InDelta(t, want.Milliseconds(), got.Milliseconds(), 200, "ttl of %s", key)
}

var contractCases = []contractCase{
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
	{name: "commit/raises a shorter fence (decimal, not lexicographic)",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "9", 0)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 10, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.FenceKey(ctKey), "10")
		}},
	{name: "commit/never lowers the fence",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "9007199254740993", 0)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 9007199254740992, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.FenceKey(ctKey), "9007199254740993")
		}},
	{name: "commit/refuses when the key is not ours",
		held: holding{"theirs", 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "5", 0)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, script.FenceKey(ctKey), "5")
		}},
	{name: "commit/never shortens a fence's life",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "9", 20*time.Second)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 10, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.FenceKey(ctKey), "10")
			requireTTLNear(t, n, script.FenceKey(ctKey), 20*time.Second)
		}},
	{name: "commit/a fence kept higher still lives at least the keep time",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "99", time.Second)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.FenceKey(ctKey), "99")
			requireTTLNear(t, n, script.FenceKey(ctKey), 7*time.Second)
		}},
	{name: "commit/a fence without an expiry gets one",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.FenceKey(ctKey), "99", 0)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireKey(t, n, script.FenceKey(ctKey), "99")
			requireTTLNear(t, n, script.FenceKey(ctKey), 7*time.Second)
		}},
	{name: "commit/refuses when the key is gone",
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.FenceKey(ctKey))
		}},

	// pending.lua
	{name: "pending/an admitted node returns its marker", admitted: true,
		args: script.PendingArgs{ID: "id1", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), ctSettings}, slice(t, res, err))
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "pending/starts a quarantine stamped with the node's clock",
		args: script.PendingArgs{ID: "id1", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 6)
			require.Equal(t, []any{int64(0), "id1"}, s[:2])
			require.Equal(t, []any{ctSettings, strconv.FormatInt(ctQuarUs, 10)}, s[3:5])
			require.Equal(t, s[2], s[5], "a new mark is stamped now")
			stamp, _ := strconv.ParseInt(s[2].(string), 10, 64)
			require.InDelta(t, n.nowUs(t), stamp, 1e6)
			require.Equal(t, map[string]string{"id": "id1", "stamp": s[2].(string), "settings": ctSettings, "quarantine": strconv.FormatInt(ctQuarUs, 10)}, n.readHash(t, script.PendingKey))
			requireTTLNear(t, n, script.PendingKey, time.Minute)
		}},
	{name: "pending/keeps a quarantine in progress",
		setup: pendingAged("id0", ctOther, time.Second),
		args:  script.PendingArgs{ID: "id1", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, []any{int64(0), "id0"}, s[:2])
			require.Equal(t, ctOther, s[3])
			stamp, _ := strconv.ParseInt(s[2].(string), 10, 64)
			now, _ := strconv.ParseInt(s[5].(string), 10, 64)
			require.InDelta(t, time.Second.Microseconds(), now-stamp, 200_000)
		}},

	{name: "pending/replaces a quarantine with other settings when told to",
		setup: pendingAged("id0", ctOther, time.Second),
		args:  script.PendingArgs{ID: "id1", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute, Replace: true},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, []any{int64(0), "id1"}, s[:2])
			require.Equal(t, ctSettings, s[3])
			require.Equal(t, s[2], s[5], "the replacement starts now")
		}},
	{name: "pending/keeps a quarantine with the same settings even when told to replace",
		setup: pendingAged("id0", ctSettings, time.Second),
		args:  script.PendingArgs{ID: "id1", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute, Replace: true},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, []any{int64(0), "id0"}, s[:2])
		}},

	// admit.lua
	{name: "admit/an aged mark with our settings admits",
		setup: pendingAged("id1", ctSettings, time.Second), args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.MarkerKey, ctSettings)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "admit/a young mark does not",
		setup: pendingAged("id1", ctSettings, 100*time.Millisecond), args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "admit/another mark than the one the caller saw does not",
		setup: pendingAged("id2", ctSettings, time.Second), args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "admit/no mark does not", args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "admit/a mark started with other settings does not",
		setup: pendingAged("id1", ctOther, time.Second), args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "admit/an admitted node says so", admitted: true, args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
		}},
	{name: "admit/a node admitted under other settings says so",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctOther, 0) }, args: script.AdmitArgs{ID: "id1", Settings: ctSettings},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-2), res)
			requireKey(t, n, script.MarkerKey, ctOther)
		}},

	// bootstrap.lua
	{name: "bootstrap/claim: an unused node gets Bootstrap's pending mark",
		args: script.ClaimArgs{Settings: ctSettings, ID: "boot1", Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, script.MarkerKey)
			p := n.readHash(t, script.PendingKey)
			require.Equal(t, "boot1", p["id"])
			require.Equal(t, ctSettings, p["settings"])
			require.InDelta(t, n.nowUs(t), atoiT(t, p["stamp"]), 1e6)
			requireTTLNear(t, n, script.PendingKey, time.Minute)
		}},
	{name: "bootstrap/claim: an admitted node is left alone", admitted: true,
		args: script.ClaimArgs{Settings: ctSettings, ID: "boot1", Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(2), res)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "bootstrap/claim: other settings are refused",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctOther, 0) },
		args:  script.ClaimArgs{Settings: ctSettings, ID: "boot1", Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-2), res)
			requireKey(t, n, script.MarkerKey, ctOther)
		}},
	{name: "bootstrap/claim: a quarantine in progress is refused and kept",
		setup: pendingAged("id1", ctSettings, 0),
		args:  script.ClaimArgs{Settings: ctSettings, ID: "boot1", Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-1), res)
			require.Equal(t, "id1", n.readHash(t, script.PendingKey)["id"])
		}},
	{name: "bootstrap/claim: its own claim is stamped anew",
		setup: pendingAged("boot1", ctSettings, 10*time.Second),
		args:  script.ClaimArgs{Settings: ctSettings, ID: "boot1", Quarantine: ctQuar, TTL: time.Minute},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			require.InDelta(t, n.nowUs(t), atoiT(t, n.readHash(t, script.PendingKey)["stamp"]), 1e6)
		}},
	{name: "bootstrap/admit: a node that carries its young claim is admitted",
		setup: pendingAged("boot1", ctSettings, 0),
		args:  script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, script.MarkerKey, ctSettings)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "bootstrap/admit: a node that lost its claim (it lost its data) is not admitted",
		args: script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-1), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "bootstrap/admit: someone else's pending mark is not a claim",
		setup: pendingAged("id1", ctSettings, 0),
		args:  script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-1), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "bootstrap/admit: a claim with other settings is not admitted",
		setup: pendingAged("boot1", ctOther, 0),
		args:  script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-1), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "bootstrap/admit: a claim older than the window is not admitted",
		setup: pendingAged("boot1", ctSettings, 6*time.Second),
		args:  script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(-1), res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "bootstrap/admit: an admitted node is left alone", admitted: true,
		args: script.ClaimedArgs{Settings: ctSettings, ID: "boot1", Window: 5 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(2), res)
		}},

	// reconfigure.lua: ctSettings is the old deployment, ctOther the new.
	{name: "reconfigure/refuse: an old node admitted with the old settings now refuses them, and records the change", admitted: true,
		args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1)}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			requireKey(t, n, script.TraceKey, ctRecord)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/refuse: another change's mark is not touched (a stale run, or other old settings)",
		setup: holdingOff(time.Second), args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctElse},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), script.Moving(ctOther)}, res)
			requireKey(t, n, script.TraceKey, ctRecord)
			require.Equal(t, "hold1", n.readHash(t, script.PendingKey)["id"])
		}},
	{name: "reconfigure/retire: a node another change retired is not touched",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Retired(ctOther), 0)
			n.put(t, script.TraceKey, ctRecord, 0)
		},
		args: script.ReconfigureArgs{Step: script.StepRetire, From: ctSettings, To: ctOther, Record: ctElse},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), script.Retired(ctOther)}, res)
		}},
	{name: "reconfigure/hold: a node another change admitted with the new settings is not touched",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, ctOther, 0)
			n.put(t, script.TraceKey, ctRecord, 0)
		},
		args: script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctElse, HoldOff: ctQuar, TTL: time.Minute, ID: "hold1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ctOther}, res)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/refuse: a quarantine of the old settings in progress is ended, so it cannot admit the node under them",
		setup: pendingAged("id1", ctSettings, 0), args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1)}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/refuse: a node that carries its hold-off already keeps it",
		setup: holdingOff(time.Second), args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1)}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			require.Equal(t, "hold1", n.readHash(t, script.PendingKey)["id"])
		}},
	{name: "reconfigure/refuse: a node this reconfiguration admitted with the new settings says so",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, ctOther, 0)
			n.put(t, script.TraceKey, ctRecord, 0)
		},
		args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(2)}, res)
			requireKey(t, n, script.MarkerKey, ctOther)
		}},
	{name: "reconfigure/hold: a node that carried the new settings before (another deployment) is not touched",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctOther, 0) },
		args:  script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctRecord, HoldOff: ctQuar, TTL: time.Minute, ID: "hold1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ctOther}, res)
			requireKey(t, n, script.MarkerKey, ctOther)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/refuse: a node of another deployment is not touched",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctThird, 0) }, args: script.ReconfigureArgs{Step: script.StepRefuse, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ctThird}, res)
			requireKey(t, n, script.MarkerKey, ctThird)
		}},
	{name: "reconfigure/retire: a node that leaves refuses everyone", admitted: true,
		args: script.ReconfigureArgs{Step: script.StepRetire, From: ctSettings, To: ctOther, Record: ctRecord},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1)}, res)
			requireKey(t, n, script.MarkerKey, script.Retired(ctOther))
		}},
	{name: "reconfigure/hold: a node that refuses the old settings gets its hold-off, stamped by its clock",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
			n.put(t, script.TraceKey, ctRecord, 0)
		},
		args: script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctRecord, HoldOff: ctQuar, TTL: time.Minute, ID: "hold1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1), ctQuarUs}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			p := n.readHash(t, script.PendingKey)
			require.Equal(t, map[string]string{"id": "hold1", "stamp": p["stamp"], "settings": ctOther,
				"quarantine": strconv.FormatInt(ctQuarUs, 10), "reconfigure": "1"}, p)
			require.InDelta(t, n.nowUs(t), atoiT(t, p["stamp"]), 1e6)
			requireTTLNear(t, n, script.PendingKey, time.Minute)
		}},
	{name: "reconfigure/hold: a new, empty node gets its hold-off",
		args: script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctRecord, HoldOff: ctQuar, TTL: time.Minute, ID: "hold1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1), ctQuarUs}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			require.Equal(t, "hold1", n.readHash(t, script.PendingKey)["id"])
		}},
	{name: "reconfigure/hold: a rerun keeps the hold-off stamped before",
		setup: holdingOff(200 * time.Millisecond), args: script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctRecord, HoldOff: ctQuar, TTL: time.Minute, ID: "hold2"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			got := res.([]any)
			require.Equal(t, int64(1), got[0])
			require.InDelta(t, ctQuarUs-200_000, got[1], 100_000)
			require.Equal(t, "hold1", n.readHash(t, script.PendingKey)["id"])
		}},
	{name: "reconfigure/hold: a node of another deployment is not touched",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, ctThird, 0) },
		args:  script.ReconfigureArgs{Step: script.StepHold, From: ctSettings, To: ctOther, Record: ctRecord, HoldOff: ctQuar, TTL: time.Minute, ID: "hold1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ctThird}, res)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/finish: a young hold-off is not over",
		setup: holdingOff(0), args: script.ReconfigureArgs{Step: script.StepFinish, From: ctSettings, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			got := res.([]any)
			require.Equal(t, int64(0), got[0])
			require.InDelta(t, ctQuarUs, got[1], 100_000)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
		}},
	{name: "reconfigure/finish: a node whose hold-off is over is admitted with the new settings, and keeps the change's record",
		setup: holdingOff(time.Second), args: script.ReconfigureArgs{Step: script.StepFinish, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(1)}, res)
			requireKey(t, n, script.MarkerKey, ctOther)
			requireKey(t, n, script.TraceKey, ctRecord)
			require.Empty(t, n.readHash(t, script.PendingKey))
		}},
	{name: "reconfigure/finish: no hold-off stamped yet (step 2 did not reach it) is not over",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, script.Moving(ctOther), 0) }, args: script.ReconfigureArgs{Step: script.StepFinish, From: ctSettings, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(0), int64(-1)}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
		}},
	{name: "reconfigure/finish: an ordinary quarantine's pending mark is not a hold-off",
		setup: func(t *testing.T, n contractNode) {
			pendingAged("id1", ctOther, time.Second)(t, n)
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
		}, args: script.ReconfigureArgs{Step: script.StepFinish, From: ctSettings, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(0), int64(-1)}, res)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
		}},
	{name: "reconfigure/finish: a node that lost its data is not admitted (it serves an ordinary quarantine)",
		args: script.ReconfigureArgs{Step: script.StepFinish, From: ctSettings, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ""}, res)
			requireNoKey(t, n, script.MarkerKey)
		}},
	{name: "reconfigure/finish: a node still on the old settings is not admitted", admitted: true,
		args: script.ReconfigureArgs{Step: script.StepFinish, From: ctSettings, To: ctOther},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), ctSettings}, res)
			requireKey(t, n, script.MarkerKey, ctSettings)
		}},
	{name: "reconfigure/the other scripts: a reconfiguring node grants no lock and is admitted by no quarantine",
		setup: holdingOff(time.Second), args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctOther, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, []any{int64(-2), int64(0), script.Moving(ctOther)}, res)
			requireNoKey(t, n, ctKey)
			r, err := runCall(n, script.PendingArgs{ID: "id9", Settings: ctSettings, Quarantine: ctQuar, TTL: time.Minute, Replace: true})
			require.NoError(t, err)
			require.Equal(t, []any{int64(1), script.Moving(ctOther)}, r)
			r, err = runCall(n, script.AdmitArgs{ID: "hold1", Settings: ctOther})
			require.NoError(t, err)
			require.Equal(t, int64(-2), r)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
			require.Equal(t, "hold1", n.readHash(t, script.PendingKey)["id"])
		}},

	// ident.lua
	{name: "ident/a server's first call writes its id", args: script.IdentRequest("id1"),
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, "id1", res)
			requireKey(t, n, script.IdentKey, "id1")
			require.Equal(t, time.Duration(-1), n.ttlOf(t, script.IdentKey), "a server's identity is a deployment-wide key: no expiry")
		}},
	{name: "ident/every later call reads the same id",
		setup: func(t *testing.T, n contractNode) { n.put(t, script.IdentKey, "id1", 0) }, args: script.IdentRequest("id2"),
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, "id1", res)
		}},
	// Every acquire, extend and commit reply ends with the server's
	// identity (runContract checks it in every case); a server without one
	// (new, or it lost its data) answers '' and grants as before: the
	// client counts nothing of it until a proof gives it one.
	{name: "acquire/a server without an identity answers with none",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			noIdent(t, n)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Fencing: true, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 5)
			require.Equal(t, int64(1), s[0])
			requireKey(t, n, ctKey, ctValue)
			requireNoKey(t, n, script.IdentKey)
		}},
	{name: "extend/a server without an identity answers with none",
		held: holding{ctValue, time.Second},
		setup: func(t *testing.T, n contractNode) {
			noIdent(t, n)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1)}, slice(t, res, err))
			requireNoKey(t, n, script.IdentKey)
		}},
	{name: "commit/a server without an identity answers with none",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			noIdent(t, n)
		},
		args: script.CommitArgs{Key: ctKey, Value: ctValue, Token: 42, Keep: 7 * time.Second},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, script.IdentKey)
		}},
	{name: "release/a server without an identity hands the key over and names none",
		told:      map[string][]string{"c1": {"!c1.a+4000 |" + ctKey}},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 30}},
		setup: func(t *testing.T, n contractNode) {
			noIdent(t, n)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c1.a+4000")
		}},

	// state.lua
	{name: "state/an empty node", args: script.StateRequest(),
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 5)
			require.Equal(t, []any{"", "", "", ""}, s[:4])
		}},
	{name: "state/marker, quarantine and a held key",
		held: holding{"theirs", 4 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, ctOther, 0)
			pendingAged("id1", ctSettings, time.Second)(t, n)
			n.put(t, script.FenceKey(ctKey), "77", 0)
		},
		args: script.Request{Script: "state", Keys: []string{script.MarkerKey, script.PendingKey, ctKey, script.FenceKey(ctKey)}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 8)
			require.Equal(t, ctOther, s[0])
			require.Equal(t, ctSettings, s[1])
			require.Equal(t, strconv.FormatInt(ctQuarUs, 10), s[3])
			require.Equal(t, "theirs", s[5])
			require.InDelta(t, 4000, s[6], 200)
			require.Equal(t, "77", s[7])
		}},
	// The key handed over inside the release (waiters whose id ends in
	// '+<ttl ms>': Lock calls without fencing).
	{name: "release/hands the key itself to a first in line that takes hand-offs, with its ttl",
		told:      map[string][]string{"c1": {"!c1.a+4000 " + ctServer + "|" + ctKey}},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 30}, {id: "c1.b+4000", ago: 20}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c1.a+4000")
			requireTTLNear(t, n, ctKey, 4*time.Second)
			requireNoKey(t, n, script.NamedKey(ctKey)) // nothing to reserve: the key is taken
			requireInLine(t, n, false, "c1.a+4000")
			requireInLine(t, n, true, "c1.b+4000")
		}},
	{name: "release/a node a reconfiguration marked hands no key over: the first in line gets a reservation",
		told:      map[string][]string{"c1": {"c1.a+4000|" + ctKey}},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 30}},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireKey(t, n, script.NamedKey(ctKey), "c1.a+4000")
		}},
	{name: "release/with the node's marker given, an admitted node still hands the key over",
		told:      map[string][]string{"c1": {"!c1.a+4000 " + ctServer + "|" + ctKey}},
		published: []string{},
		admitted:  true, held: holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 30}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c1.a+4000")
		}},
	{name: "release/a key that is not ours is handed to nobody",
		published: []string{},
		held:      holding{"theirs", 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "theirs")
			requireTTLNear(t, n, ctKey, 5*time.Second)
			requireInLine(t, n, true, "c1.a+4000")
		}},
	{name: "release/a named call that gives up hands the free key to a next in line that takes hand-offs",
		told:      map[string][]string{"c2": {"!c2.w1+3000 " + ctServer + "|" + ctKey}},
		published: []string{},
		line:      []waiter{{id: "c2.w1+3000", ago: 0}},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.NamedKey(ctKey), "c1.me", 3*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "c1.me", Window: 2 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireKey(t, n, ctKey, "c2.w1+3000")
			requireTTLNear(t, n, ctKey, 3*time.Second)
			requireNoKey(t, n, script.NamedKey(ctKey))
		}},
	{name: "release/a Lock call that ends gives back a key handed to it, to the next in line",
		told:      map[string][]string{"c2": {"!c2.w1+3000 " + ctServer + "|" + ctKey}},
		published: []string{},
		held:      holding{"c1.me+5000", 5 * time.Second}, line: []waiter{{id: "c2.w1+3000", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "c1.me+5000", Window: 2 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c2.w1+3000")
		}},
	{name: "release/a failed attempt's cleanup leaves a key handed to its Lock call alone",
		published: []string{},
		held:      holding{"c1.me+5000", 5 * time.Second}, line: []waiter{{id: "c2.w1+3000", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "c1.me+5000", Window: 2 * time.Second, Back: true, Place: 1, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "c1.me+5000")
			requireTTLNear(t, n, ctKey, 5*time.Second)
			requireInLine(t, n, true, "c1.me+5000", "c2.w1+3000")
		}},
	{name: "release/an older waiter id (no ttl) still gets a reservation, not the key",
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireNoKey(t, n, ctKey)
			requireKey(t, n, script.NamedKey(ctKey), "c1.a")
		}},
	{name: "acquire/a key handed to this Lock call stays as it is, and the call is told",
		admitted: true, held: holding{"c1.me+5000", 2 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Fencing: true, Waiter: "c1.me+5000", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 2)
			require.Equal(t, int64(-5), s[0])
			require.InDelta(t, 2000, s[1], 200)
			requireKey(t, n, ctKey, "c1.me+5000")
			requireTTLNear(t, n, ctKey, 2*time.Second)
			requireInLine(t, n, false, "c1.me+5000")
		}},
	{name: "acquire/a key handed to another Lock call is held",
		admitted: true, held: holding{"c1.other+5000", 2 * time.Second},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "c1.me+5000", Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, int64(0), s[0])
			requireKey(t, n, ctKey, "c1.other+5000")
			requireInLine(t, n, true, "c1.me+5000")
		}},
	{name: "acquire/a key handed to a call ahead of this one in line is -6, and the call joins the line",
		admitted: true, held: holding{"c2.x~100+5000", 2 * time.Second},
		args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "c1.me~200+5000", Place: 200, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Equal(t, int64(-6), s[0])
			require.InDelta(t, 2000, s[1], 200)
			requireKey(t, n, ctKey, "c2.x~100+5000")
			requireInLine(t, n, true, "c1.me~200+5000")
		}},
	{name: "acquire/a key handed to a call behind this one, or to an older id of this call, is held (0)",
		admitted: true, held: holding{"c1.old~200+5000", 2 * time.Second},
		args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "c1.me~200+5000", Place: 200, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
		}},
	{name: "release/a give-back puts the call's new id in its old place before it hands the key on",
		told:      map[string][]string{"c1": {"!c1.new~100+5000 " + ctServer + "|" + ctKey}},
		published: []string{},
		held:      holding{"c1.old~100+5000", 5 * time.Second}, line: []waiter{{id: "c2.w~300+3000", ago: 0}},
		fromNow: true, args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "c1.old~100+5000", Window: 2 * time.Second, Line: ctLine, Next: "c1.new~100+5000", Place: -1_000_000},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c1.new~100+5000")
			requireTTLNear(t, n, ctKey, 5*time.Second)
			requireInLine(t, n, false, "c1.old~100+5000", "c1.new~100+5000")
			requireInLine(t, n, true, "c2.w~300+3000")
		}},
	{name: "release/a give-back's new id is seen at once, in a place however old",
		told:      map[string][]string{"c2": {"!c2.w~50+3000 " + ctServer + "|" + ctKey}},
		published: []string{},
		held:      holding{"c1.old~100+5000", 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			waiting(t, n, "c2.w~50+3000", 50, n.nowUs(t))
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Waiter: "c1.old~100+5000", Window: 2 * time.Second, Place: 100, Line: ctLine, Next: "c1.new~100+5000"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c2.w~50+3000")
			requireSeen(t, n, false, "c2.w~50+3000")
			requireInLine(t, n, true, "c1.new~100+5000")
			requireSeen(t, n, true, "c1.new~100+5000")
		}},
	{name: "release/a first in line whose Client does not listen is passed over for the next",
		told:      map[string][]string{"c2": {"!c2.b~2+4000 " + ctServer + "|" + ctKey}},
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "gone.a~1+4000", ago: 30}, {id: "c2.b~2+4000", ago: 20}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireKey(t, n, ctKey, "c2.b~2+4000")
			requireInLine(t, n, false, "gone.a~1+4000", "c2.b~2+4000")
		}},
	{name: "release/with nobody listening for anyone in line the key stays free and every waiter is told",
		published: []string{""},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "gone.a~1+4000", ago: 0}},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Waiter: "me", Window: 3 * time.Second, Line: ctLine},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, script.NamedKey(ctKey))
		}},
	{name: "state/a free key", args: script.Request{Script: "state", Keys: []string{script.MarkerKey, script.PendingKey, ctKey, script.FenceKey(ctKey)}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 8)
			require.Equal(t, []any{"", int64(-2), ""}, s[5:])
		}},
}
