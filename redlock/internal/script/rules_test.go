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
	} {
		unmarked, used := BootstrapUse(tc.states, s)
		require.Equal(t, tc.unmarked, unmarked, tc.name)
		require.Equal(t, tc.used, used, tc.name)
	}
}

func TestProve(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ids      []string
		verified []bool
		want     Proof
	}{
		{"all distinct", []string{"a", "b", "c"}, []bool{false, false, false}, Proof{Verified: []int{0, 1, 2}}},
		{"one server twice", []string{"a", "a", "c"}, []bool{false, false, false}, Proof{Dup: true, First: 0, Second: 1}},
		{"a verified entry missing", []string{"", "a", "c"}, []bool{true, false, true}, Proof{Missed: true}},
		{"an unverified entry missing", []string{"a", "", "c"}, []bool{false, false, true}, Proof{Verified: []int{0}}},
		{"nothing new", []string{"a", "b", ""}, []bool{true, true, false}, Proof{}},
	} {
		require.Equal(t, tc.want, Prove(tc.ids, tc.verified), tc.name)
	}
}
