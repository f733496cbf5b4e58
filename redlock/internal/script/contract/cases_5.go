package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// cases5: cases of acquire.lua, release.lua, state.lua.
var cases5 = []contractCase{
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
