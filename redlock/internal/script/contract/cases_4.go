package contract

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// cases4: cases of reconfigure.lua, ident.lua, acquire.lua, extend.lua, commit.lua, release.lua, state.lua.
var cases4 = []contractCase{
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
}
