package contract

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// cases3: cases of commit.lua, pending.lua, admit.lua, bootstrap.lua, reconfigure.lua.
var cases3 = []contractCase{
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
}
