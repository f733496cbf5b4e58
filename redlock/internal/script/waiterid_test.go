package script

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A waiter id reads back as it was written, in the form the scripts
// match: 'client.nonce', with '~place+ttl' only for a call that takes
// hand-offs.
func TestWaiterID_StringAndParse(t *testing.T) {
	plain := WaiterID{Client: "c1", Nonce: "n-_x"}
	require.Equal(t, "c1.n-_x", plain.String())
	handed := WaiterID{Client: "c1", Nonce: "n-_x", Place: 1700000000123456, TTL: 5 * time.Second}
	require.Equal(t, "c1.n-_x~1700000000123456+5000", handed.String())
	for _, w := range []WaiterID{plain, handed} {
		got, ok := ParseWaiterID(w.String())
		require.True(t, ok, w.String())
		require.Equal(t, w, got)
	}
	for _, bad := range []string{"noclient", ".nonce", "c.n~x+5", "c.n~5", "c.n~5+-1"} {
		_, ok := ParseWaiterID(bad)
		require.False(t, ok, bad)
	}
}

// The notices release.lua publishes read back as what they say; a key may
// hold '|' and spaces, and a payload without a key is no notice.
func TestParseNotice(t *testing.T) {
	for _, tc := range []struct {
		channel, payload string
		want             Notice
		ok               bool
	}{
		{ReleaseChannel("a|b c"), "w1 w2", Notice{Key: "a|b c", Names: "w1 w2"}, true},
		{ReleaseChannel("k"), "", Notice{Key: "k"}, true},
		{WakeChannel("c1"), "c1.a|a|b c", Notice{Key: "a|b c", Names: "c1.a"}, true},
		{WakeChannel("c1"), "!c1.a~1+5000 srv|a|b", Notice{Key: "a|b", Names: "c1.a~1+5000", Handed: true, Server: "srv"}, true},
		{WakeChannel("c1"), "!c1.a~1+5000 |a b", Notice{Key: "a b", Names: "c1.a~1+5000", Handed: true}, true},
		{WakeChannel("c1"), "!c1.a~1+5000|a", Notice{Key: "a", Names: "c1.a~1+5000", Handed: true}, true},
		{WakeChannel("c1"), "junk", Notice{}, false},
		{WakeChannel("c1"), "!junk", Notice{}, false},
	} {
		got, ok := ParseNotice(tc.channel, tc.payload)
		require.Equal(t, tc.ok, ok, "%s %q", tc.channel, tc.payload)
		if ok {
			require.Equal(t, tc.want, got, "%s %q", tc.channel, tc.payload)
		}
	}
	var names []string
	for n := range Named("w1 w2") {
		names = append(names, n)
	}
	require.Equal(t, []string{"w1", "w2"}, names)
}

// Left is the quarantine's length less the time it has run on the node's
// clock.
func TestQuarantine_Left(t *testing.T) {
	q := Quarantine{Stamp: 1_000_000, Length: 500_000, Now: 1_200_000}
	require.Equal(t, 300*time.Millisecond, q.Left())
	q.Now = 1_600_000
	require.Equal(t, -100*time.Millisecond, q.Left())
}
