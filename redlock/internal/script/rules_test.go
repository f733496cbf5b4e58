package script

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The requests the model checker sends are the calls a Node sends.
func TestRequests_BootstrapStateIdent(t *testing.T) {
	require.Equal(t, Request{Script: "state", Keys: []string{MarkerKey, PendingKey}}, StateRequest())
	require.Equal(t, Request{Script: "bootstrap", Keys: []string{MarkerKey, PendingKey}, Args: []string{"claim", "s", "b1", "1500001", "3000"}},
		ClaimRequest(ClaimArgs{Settings: "s", ID: "b1", Quarantine: 1500000500, TTL: 3000000000}))
	require.Equal(t, Request{Script: "bootstrap", Keys: []string{MarkerKey, PendingKey}, Args: []string{"admit", "s", "b1", "700000"}},
		ClaimedRequest(ClaimedArgs{Settings: "s", ID: "b1", Window: 700000000}))
	require.Equal(t, Request{Script: "ident", Keys: []string{IdentKey}, Args: []string{"f"}}, IdentRequest("f"))
}

func TestBootstrapUse(t *testing.T) {
	const s = "σ"
	for _, tc := range []struct {
		name     string
		states   []State
		unmarked []int
		used     bool
	}{
		{"bare", []State{{}, {}, {}}, []int{0, 1, 2}, false},
		{"admitted", []State{{Marker: s}, {Marker: s}, {Marker: s}}, nil, true},
		{"one node lost its data", []State{{}, {Marker: s}, {Marker: s}}, []int{0}, true},
		{"a quarantine in progress", []State{{Pending: s}, {}, {}}, []int{0, 1, 2}, true},
		{"a reconfiguration to these settings, a new node bare", []State{{Marker: Moving(s)}, {Marker: Moving(s)}, {}}, []int{0, 1, 2}, true},
	} {
		unmarked, used := BootstrapUse(tc.states, s)
		require.Equal(t, tc.unmarked, unmarked, tc.name)
		require.Equal(t, tc.used, used, tc.name)
	}
}

func TestProve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ids    []string
		proven []string
		want   Proof
	}{
		{"all distinct", []string{"a", "b", "c"}, []string{"", "", ""}, Proof{Verified: []int{0, 1, 2}}},
		{"one server twice", []string{"a", "a", "c"}, []string{"", "", ""}, Proof{Dup: true, First: 0, Second: 1}},
		{"a verified entry missing", []string{"", "a", "c"}, []string{"x", "", "c"}, Proof{Missed: true}},
		{"an unverified entry missing", []string{"a", "", "c"}, []string{"", "", "c"}, Proof{Verified: []int{0}}},
		{"nothing new", []string{"a", "b", ""}, []string{"a", "b", ""}, Proof{}},
		// I1: entry 0 was proven on a server that entry 1 does not reach;
		// re-pointed, it reads entry 1's server.
		{"a verified entry re-pointed to another entry's server", []string{"b", "b", "c"}, []string{"a", "b", "c"}, Proof{Dup: true, First: 0, Second: 1}},
		{"a verified entry re-pointed to a new server", []string{"d", "b", "c"}, []string{"a", "b", "c"}, Proof{Verified: []int{0}}},
		{"a verified entry whose server lost its data", []string{"e", "b", ""}, []string{"a", "b", ""}, Proof{Verified: []int{0}}},
		// Entry 1, never verified, reads the identity entry 0 was proven
		// with, while entry 0 now reads another: entry 0 takes the new
		// one, and the proven identities stay distinct.
		{"an old identity read by another entry", []string{"d", "a", "c"}, []string{"a", "", "c"}, Proof{Verified: []int{0, 1}}},
	} {
		require.Equal(t, tc.want, Prove(tc.ids, tc.proven), tc.name)
	}
}

func TestSameServer(t *testing.T) {
	require.True(t, SameServer("a", "a"))
	require.False(t, SameServer("a", "b"), "another server")
	require.False(t, SameServer("a", ""), "a server without an identity: new, or it lost its data")
	require.False(t, SameServer("", ""), "an entry never verified")
	require.False(t, SameServer("", "a"), "an entry never verified")
}

func TestRequests_Reconfigure(t *testing.T) {
	keys := []string{MarkerKey, PendingKey, TraceKey}
	require.Equal(t, Request{Script: "reconfigure", Keys: keys, Args: []string{"hold", "S", "T", "R", "2000001", "5000", "h1"}},
		ReconfigureRequest(ReconfigureArgs{Step: StepHold, From: "S", To: "T", Record: "R", HoldOff: 2000000500, TTL: 5000000000, ID: "h1"}))
	require.Equal(t, Request{Script: "reconfigure", Keys: keys, Args: []string{"refuse", "S", "T", "R"}},
		ReconfigureRequest(ReconfigureArgs{Step: StepRefuse, From: "S", To: "T", Record: "R"}))
	require.Equal(t, Request{Script: "reconfigure", Keys: keys, Args: []string{"finish", "", "T"}},
		ReconfigureRequest(ReconfigureArgs{Step: StepFinish, To: "T"}))
}

func TestConfirm(t *testing.T) {
	const s = "σ"
	read := func(states ...State) []Peer {
		var out []Peer
		for _, st := range states {
			out = append(out, ReadPeer(st, s))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		peers []Peer
		all   int
		want  Confirmation
	}{
		{"a peer admitted", read(State{Marker: "other"}, State{Marker: s}), 2, ConfirmAdmitted},
		{"every peer bare", read(State{}, State{Pending: s}), 2, ConfirmFirst},
		{"a peer missing", read(State{}), 2, ConfirmWait},
		{"no peers", nil, 0, ConfirmFirst},
		{"a peer held off to these settings", read(State{Marker: Moving(s)}, State{}), 2, ConfirmWait},
		{"a peer retired", read(State{Marker: Retired(s)}, State{}), 2, ConfirmConflict},
		{"a quarantine of other settings", read(State{Pending: "other"}, State{}), 2, ConfirmConflict},
	} {
		require.Equal(t, tc.want, Confirm(tc.peers, tc.all), tc.name)
	}
}

func TestReconfigureRules(t *testing.T) {
	rec := ChangeRecord("S", "T", []string{"b", "a"})
	require.Equal(t, rec, ChangeRecord("S", "T", []string{"a", "b"}), "the new nodes in any order")
	other := ChangeRecord("S", "T", []string{"a", "c"})
	ch, ok := ParseChange(rec)
	require.True(t, ok)
	require.Equal(t, Change{From: "S", To: "T", Nodes: 2}, ch)
	_, ok = ParseChange("S")
	require.False(t, ok, "an old trace (the settings alone) is no record")

	require.True(t, ReconfigureMovable("S", "", "S", "T", rec))
	require.True(t, ReconfigureMovable("", "", "S", "T", rec))
	require.True(t, ReconfigureMovable(Moving("T"), rec, "S", "T", rec), "this change's mark: a rerun")
	require.True(t, ReconfigureMovable(Retired("T"), rec, "S", "T", rec))
	require.True(t, ReconfigureMovable("T", rec, "S", "T", rec), "finished by an earlier run")
	require.False(t, ReconfigureMovable(Moving("T"), other, "S", "T", rec), "another node list's change (R3)")
	require.False(t, ReconfigureMovable(Moving("T"), ChangeRecord("S2", "T", []string{"a", "b"}), "S", "T", rec), "other old settings (R2)")
	require.False(t, ReconfigureMovable(Moving("U"), "", "S", "T", rec), "another change's mark")
	require.False(t, ReconfigureMovable(Retired("U"), "", "S", "T", rec))
	require.False(t, ReconfigureMovable("T", "", "S", "T", rec), "another deployment's node")
	require.False(t, ReconfigureMovable("T", other, "S", "T", rec), "another change finished it")
	require.False(t, ReconfigureMovable("U", "", "S", "T", rec))
	require.False(t, ReconfigureMovable(Moving("T"), rec, "T", "T", ChangeRecord("T", "T", nil)), "old = new over a change's marks (R4)")
	require.Equal(t, 2, ReconfigureNeed(3))
	require.Equal(t, 1, ReconfigureNeed(1))
	require.True(t, ReconfigureUnchanged("S", "S", []string{"a", "b"}, []string{"b", "a"}))
	require.False(t, ReconfigureUnchanged("S", "T", []string{"a"}, []string{"a"}))
	require.False(t, ReconfigureUnchanged("S", "S", []string{"a", "b"}, []string{"a", ""}))
	require.False(t, ReconfigureUnchanged("S", "S", []string{"a", "b"}, []string{"a", "c"}))
}

// What an old node says of the old settings when Reconfigure was given
// none, and when a change counts as done.
func TestReconfigureReadAndFinished(t *testing.T) {
	const s, t2, u = "S", "T", "U"
	rec := ChangeRecord(s, t2, []string{"a", "b"})
	for _, tc := range []struct {
		name, marker, trace, to, want string
	}{
		{"admitted", s, "", t2, s},
		{"new or wiped: says nothing", "", "", t2, ""},
		{"marked by the change: its old settings", Moving(t2), rec, t2, s},
		{"retired by the change", Retired(t2), rec, t2, s},
		{"finished, a rerun of it", t2, rec, t2, s},
		{"finished, a change from there", t2, rec, u, t2},
		{"marked by an older version (no record)", Moving(t2), "", t2, Moving(t2)},
	} {
		require.Equal(t, tc.want, ReconfigureOldSettingsOf(tc.marker, tc.trace, tc.to), tc.name)
	}

	require.True(t, ReconfigureFinished(s, t2, []string{t2, t2}, []string{Retired(t2)}))
	require.True(t, ReconfigureFinished(s, t2, []string{t2}, nil))
	require.False(t, ReconfigureFinished(s, t2, []string{t2, Moving(t2)}, nil), "a node only marked: its hold-off may never have been stamped")
	require.False(t, ReconfigureFinished(s, t2, []string{t2}, []string{s}), "an old node that leaves still carries the old settings")
	require.False(t, ReconfigureFinished(s, t2, []string{t2}, []string{Moving(t2)}))
	require.False(t, ReconfigureFinished(t2, t2, []string{t2}, nil), "the same settings: nothing to finish")
}
