package contract

import (
	"slices"
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

// contractCases are the scripts' cases, in the order they run.
var contractCases = slices.Concat(
	cases1,
	cases2,
	cases3,
	cases4,
	cases5,
)
