package redlock

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// One lease over several keys: LockAll, TryLockAll, DoAll and the
// LeaseSet they return (docs/protocol.md, "One lease over several keys").

// setKeys returns n keys of t's own whose byte order is their index
// order.
func setKeys(t *testing.T, n int) []string {
	t.Helper()
	base := testenv.Key(t)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = base + ":" + string(rune('a'+i))
	}
	return keys
}

// releaseOnCleanup releases s when t ends, if a test left it held.
func releaseOnCleanup(t *testing.T, s *LeaseSet) {
	t.Helper()
	t.Cleanup(func() { _ = s.Release(context.Background()) })
}

// requireSetDone fails t unless s's Done closes within 3 s.
func requireSetDone(t *testing.T, s *LeaseSet, what string) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(3 * time.Second):
		t.Fatalf("the set's Done did not close: %s", what)
	}
}

func TestLeaseSet_TakesEveryKeyInByteOrderAndReleasesThemAll(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 3)
	// Listed out of order: the set comes in byte order.
	s, err := c.LockAll(ctx, []string{keys[2], keys[0], keys[1]}, time.Second)
	require.NoError(t, err)
	releaseOnCleanup(t, s)
	ls := s.Leases()
	require.Len(t, ls, 3)
	for i, l := range ls {
		require.Equal(t, keys[i], l.Key())
		ks, err := c.Inspect(ctx, keys[i])
		require.NoError(t, err)
		require.Equal(t, VerdictHeld, ks.Verdict, "key %d", i)
		require.Equal(t, l.Value(), ks.Holder, "key %d", i)
	}
	require.True(t, s.Deadline().After(time.Now()))
	select {
	case <-s.Done():
		t.Fatal("Done closed on a live set")
	default:
	}
	require.NoError(t, s.Release(ctx))
	requireSetDone(t, s, "after Release")
	for _, k := range keys {
		cl.requireGone(t, k, "after the set's Release")
	}
	require.ErrorIs(t, s.Release(ctx), ErrNotHeld, "a second Release")
	require.ErrorIs(t, s.Extend(ctx, time.Second), ErrNotHeld, "Extend after Release")
}

// An empty key list, an empty or reserved key and a key listed twice are
// input errors that touch no node, for each of the three calls.
func TestLeaseSet_InputErrorsTouchNoNode(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	k := testenv.Key(t)
	fn := func(context.Context, *LeaseSet) error { return errors.New("fn ran") }
	calls := map[string]func(keys []string) error{
		"LockAll": func(keys []string) error {
			_, err := c.LockAll(ctx, keys, time.Second)
			return err
		},
		"TryLockAll": func(keys []string) error {
			_, err := c.TryLockAll(ctx, keys, time.Second)
			return err
		},
		"DoAll": func(keys []string) error { return c.DoAll(ctx, keys, time.Second, fn) },
	}
	bad := map[string][]string{
		"no keys":       nil,
		"empty list":    {},
		"empty key":     {k, ""},
		"reserved key":  {k, "quorumlock:x"},
		"listed twice":  {k, k + ":b", k},
		"twice, apart":  {k + ":b", k, k + ":b"},
		"only the same": {k, k},
	}
	for name, call := range calls {
		for what, keys := range bad {
			err := call(keys)
			require.ErrorIs(t, err, ErrInvalidKey, "%s, %s", name, what)
			var ie *InputError
			require.ErrorAs(t, err, &ie, "%s, %s", name, what)
		}
		_, err := c.LockAll(ctx, []string{k, k + ":b"}, 0)
		require.ErrorIs(t, err, ErrInvalidTTL, name)
	}
	_, err := c.TryLockAll(ctx, []string{k}, time.Second, WaitAtMost(time.Second))
	require.Error(t, err, "TryLockAll with a wait bound")
	require.Error(t, c.DoAll(ctx, []string{k}, time.Second, nil), "DoAll with a nil fn")
	require.Zero(t, f.total(), "an input error touched the nodes: %s", f.breakdown())
}

// TryLockAll whose second key (in byte order) is held fails naming that
// key, wrapping ErrNotObtained, and the first key, which it took, is free
// again when it returns: all or nothing.
func TestTryLockAll_ReleasesTheKeysItTookWhenALaterOneIsHeld(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	other := cl.client(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	lb, err := other.TryLock(ctx, keys[1], 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lb.Release(ctx) })

	s, err := c.TryLockAll(ctx, []string{keys[1], keys[0]}, 5*time.Second)
	require.Nil(t, s)
	require.ErrorIs(t, err, ErrNotObtained)
	require.True(t, IsHeld(err), "not a refusal for a held key: %v", err)
	require.Contains(t, err.Error(), keyText(keys[1]), "the error does not name the held key")
	var noe *NotObtainedError
	require.ErrorAs(t, err, &noe)
	require.Equal(t, keys[1], noe.Key)

	// The first key is free at once, not when its ttl (5 s) runs out.
	ks, err := c.Inspect(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, VerdictFree, ks.Verdict, "the first key is still held after TryLockAll failed: %s", ks.Summary)
	la, err := other.TryLock(ctx, keys[0], time.Second)
	require.NoError(t, err, "another client cannot take the first key")
	require.NoError(t, la.Release(ctx))
}

// DoAll runs fn with every key held, and releases them all after.
func TestDoAll_RunsFnHoldingEveryKey(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	ran := false
	err := c.DoAll(ctx, []string{keys[1], keys[0]}, time.Second, func(ctx context.Context, s *LeaseSet) error {
		ran = true
		got := make([]string, 0, 2)
		for _, l := range s.Leases() {
			got = append(got, l.Key())
			ks, err := c.Inspect(ctx, l.Key())
			if err != nil {
				return err
			}
			if ks.Verdict != VerdictHeld || ks.Holder != l.Value() {
				return errors.New("a key of the set is not held: " + ks.Summary)
			}
		}
		if !slices.Equal(got, keys) {
			return errors.New("leases not in byte order")
		}
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	for _, k := range keys {
		cl.requireGone(t, k, "after DoAll")
	}
	assert.False(t, renewedAny(c), "DoAll left leases in the renewal")
}
