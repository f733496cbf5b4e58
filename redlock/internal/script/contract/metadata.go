package contract

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The holder metadata's part of the contract: it is written only where
// the lock key holds its owner, follows the key's expiry, goes with the
// key, and changes no verdict.

var ctMetaKey = script.MetaKey(ctKey)

var metadataCases = []contractCase{
	{name: "acquire/a grant stores the metadata with the key's expiry", admitted: true,
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine, Metadata: "host=a pid=1"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireKey(t, n, ctMetaKey, ctValue+"\nhost=a pid=1")
			requireTTLNear(t, n, ctMetaKey, 5*time.Second)
		}},
	{name: "acquire/a held key keeps its holder's metadata",
		admitted: true, held: holding{"theirs", 3 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "theirs\nhost=b", 3*time.Second)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Waiter: "w1", Line: ctLine, Metadata: "host=a"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, int64(0), slice(t, res, err)[0])
			requireKey(t, n, ctKey, "theirs")
			requireKey(t, n, ctMetaKey, "theirs\nhost=b")
		}},
	{name: "acquire/a leftover of another owner's metadata does not refuse a grant",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "gone\nhost=b", 3*time.Second)
		},
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine, Metadata: "host=a"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(0)}, slice(t, res, err))
			requireKey(t, n, ctKey, ctValue)
			requireKey(t, n, ctMetaKey, ctValue+"\nhost=a")
		}},
	{name: "acquire/a refused node writes no metadata",
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine, Metadata: "host=a"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(-1), int64(0)}, slice(t, res, err))
			requireNoKey(t, n, ctMetaKey)
		}},

	{name: "extend/our metadata follows our key's expiry, another's is left alone",
		setup: func(t *testing.T, n contractNode) {
			n.put(t, "a", "va", time.Second)
			n.put(t, script.MetaKey("a"), "va\nhost=a", time.Second)
			n.put(t, "b", "vb", time.Second)
			n.put(t, script.MetaKey("b"), "old\nhost=x", time.Second) // a leftover
		},
		args: []script.ExtendArgs{{Key: "a", Value: "va", TTL: 6 * time.Second, Meta: true}, {Key: "b", Value: "vb", TTL: 6 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, script.MetaKey("a"), 6*time.Second)
			requireKey(t, n, script.MetaKey("a"), "va\nhost=a")
			requireTTLNear(t, n, script.MetaKey("b"), time.Second)
		}},
	{name: "extend/another's key keeps its metadata's expiry",
		held: holding{"theirs", time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, ctValue+"\nhost=a", time.Second) // ours, but the key is not
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Meta: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireTTLNear(t, n, ctMetaKey, time.Second)
		}},

	{name: "extend/a batch with metadata on some leases only renews each and creates none",
		admitted: true,
		setup: func(t *testing.T, n contractNode) {
			n.put(t, "a", "va", time.Second)
			n.put(t, script.MetaKey("a"), "va\nhost=a", time.Second)
			n.put(t, "b", "vb", time.Second) // a lease without metadata
		},
		args: []script.ExtendArgs{{Key: "a", Value: "va", TTL: 6 * time.Second, Meta: true}, {Key: "b", Value: "vb", TTL: 7 * time.Second}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(1), int64(1)}, slice(t, res, err))
			requireTTLNear(t, n, "a", 6*time.Second)
			requireTTLNear(t, n, script.MetaKey("a"), 6*time.Second)
			requireTTLNear(t, n, "b", 7*time.Second)
			requireNoKey(t, n, script.MetaKey("b"))
		}},
	{name: "extend/a node a reconfiguration marked renews neither our key nor its metadata",
		held: holding{ctValue, time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
			n.put(t, ctMetaKey, ctValue+"\nhost=a", time.Second)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Meta: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, time.Second)
			requireKey(t, n, ctMetaKey, ctValue+"\nhost=a")
			requireTTLNear(t, n, ctMetaKey, time.Second)
		}},
	{name: "extend/a retired node renews neither our key nor its metadata",
		held: holding{ctValue, time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Retired(ctOther), 0)
			n.put(t, ctMetaKey, ctValue+"\nhost=a", time.Second)
		},
		args: []script.ExtendArgs{{Key: ctKey, Value: ctValue, TTL: 8 * time.Second, Meta: true}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(0)}, slice(t, res, err))
			requireTTLNear(t, n, ctKey, time.Second)
			requireTTLNear(t, n, ctMetaKey, time.Second)
		}},

	{name: "release/deletes the metadata with our key",
		held: holding{ctValue, 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, ctValue+"\nhost=a", 5*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 30 * time.Millisecond, Line: ctLine, Meta: true},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, ctMetaKey)
		}},
	{name: "release/another's key keeps its metadata",
		held: holding{"theirs", 5 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "theirs\nhost=b", 5*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 30 * time.Millisecond, Line: ctLine, Meta: true},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "theirs")
			requireKey(t, n, ctMetaKey, "theirs\nhost=b")
		}},

	{name: "release/a node a reconfiguration marked deletes our key and its metadata, and hands the key to nobody",
		published: []string{},
		held:      holding{ctValue, 5 * time.Second}, line: []waiter{{id: "c1.a+4000", ago: 30, seen: true}},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
			n.put(t, ctMetaKey, ctValue+"\nhost=a", 5*time.Second)
		},
		args: script.ReleaseArgs{Key: ctKey, Value: ctValue, Tomb: 5 * time.Second, Window: 3 * time.Second, Line: ctLine, Meta: true},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, ctMetaKey)
			requireKey(t, n, script.NamedKey(ctKey), "c1.a+4000") // a reservation, not the key
		}},

	{name: "acquire/a node a reconfiguration marked grants nothing and writes no metadata",
		setup:   func(t *testing.T, n contractNode) { n.put(t, script.MarkerKey, script.Moving(ctOther), 0) },
		fromNow: true, args: script.AcquireArgs{Key: ctKey, Value: ctValue, TTL: 5 * time.Second, Settings: ctSettings, Line: ctLine, Metadata: "host=a"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.Equal(t, []any{int64(-2), int64(0), script.Moving(ctOther)}, slice(t, res, err))
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, ctMetaKey)
		}},

	// meta.lua checks no marker: it writes no lock key and no expiry
	// longer than the key's, so on a marked node it changes nothing a
	// script decides, and the metadata goes with the key.
	{name: "meta/on a node a reconfiguration marked stores with the key's expiry, and the key keeps its own",
		held: holding{"c1.w~1+4000", 2 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, script.MarkerKey, script.Moving(ctOther), 0)
		},
		args: script.MetaArgs{Key: ctKey, Value: "c1.w~1+4000", Metadata: "host=w"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireTTLNear(t, n, ctKey, 2*time.Second)
			requireTTLNear(t, n, ctMetaKey, 2*time.Second)
			requireKey(t, n, script.MarkerKey, script.Moving(ctOther))
		}},
	{name: "meta/stores where the key holds the value, with its expiry",
		held: holding{"c1.w~1+4000", 4 * time.Second},
		args: script.MetaArgs{Key: ctKey, Value: "c1.w~1+4000", Metadata: "host=w"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(1), res)
			requireKey(t, n, ctKey, "c1.w~1+4000")
			requireKey(t, n, ctMetaKey, "c1.w~1+4000\nhost=w")
			requireTTLNear(t, n, ctMetaKey, 4*time.Second)
		}},
	{name: "meta/writes nothing where the key holds another value",
		held: holding{"theirs", 4 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "theirs\nhost=b", 4*time.Second)
		},
		args: script.MetaArgs{Key: ctKey, Value: "c1.w~1+4000", Metadata: "host=w"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireKey(t, n, ctKey, "theirs")
			requireKey(t, n, ctMetaKey, "theirs\nhost=b")
		}},
	{name: "meta/writes nothing where the key is gone",
		args: script.MetaArgs{Key: ctKey, Value: "c1.w~1+4000", Metadata: "host=w"},
		check: func(t *testing.T, n contractNode, res any, err error) {
			require.NoError(t, err)
			require.Equal(t, int64(0), res)
			requireNoKey(t, n, ctKey)
			requireNoKey(t, n, ctMetaKey)
		}},

	{name: "state/returns the metadata key's value",
		held: holding{"theirs", 4 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "theirs\nhost=b", 4*time.Second)
		},
		args: script.Request{Script: "state", Keys: []string{script.MarkerKey, script.PendingKey, ctKey, script.FenceKey(ctKey), ctMetaKey}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			s := slice(t, res, err)
			require.Len(t, s, 9)
			require.Equal(t, "theirs\nhost=b", s[8])
			st, perr := script.StateOf(s, nil)
			require.NoError(t, perr)
			require.Equal(t, "host=b", st.Meta)
		}},
	{name: "state/a leftover of another owner's metadata reads as none",
		held: holding{"theirs", 4 * time.Second},
		setup: func(t *testing.T, n contractNode) {
			n.put(t, ctMetaKey, "gone\nhost=b", 4*time.Second)
		},
		args: script.Request{Script: "state", Keys: []string{script.MarkerKey, script.PendingKey, ctKey, script.FenceKey(ctKey), ctMetaKey}},
		check: func(t *testing.T, n contractNode, res any, err error) {
			st, perr := script.StateOf(slice(t, res, err), nil)
			require.NoError(t, perr)
			require.Empty(t, st.Meta)
		}},
}
