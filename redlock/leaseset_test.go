package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
	// Bounded: a key listed twice that got through would wait for itself.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
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

// Two Clients lock the same two keys, listed in opposite orders, round
// after round: neither deadlocks (every call returns within its ctx), and
// no key ever has two holders at once (each holder counts itself in on
// every key of its set while it holds it).
//
// Guards against: taking the keys in the order they are listed, where
// each Client holds its first key and waits for the other's forever.
func TestLockAll_OppositeOrdersNeitherDeadlockNorShareAKey(t *testing.T) {
	cl := newCluster(t, 5)
	a, _ := cl.ready(t, roomy)
	b := cl.client(t, roomy)
	keys := setKeys(t, 2)
	orders := [][]string{{keys[0], keys[1]}, {keys[1], keys[0]}}
	const rounds = 25
	var occupied [2]atomic.Int32
	var overlaps, sections atomic.Int32
	errs := make(chan error, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i, c := range []*Client{a, b} {
		wg.Go(func() {
			for range rounds {
				s, err := c.LockAll(ctx, orders[i], 2*time.Second)
				if err != nil {
					errs <- err
					return
				}
				for k := range occupied {
					if occupied[k].Add(1) > 1 {
						overlaps.Add(1)
					}
				}
				sections.Add(1)
				// The section's work, for the other to run into: a
				// round trip to a node (a read of one key).
				_ = cl.value(t, 0, keys[0])
				for k := range occupied {
					occupied[k].Add(-1)
				}
				if err := s.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a LockAll round failed (a deadlock ends with the ctx): %v", err)
	}
	require.Zero(t, overlaps.Load(), "a key had two holders at once")
	require.EqualValues(t, 2*rounds, sections.Load())
}

// While LockAll waits for a later key for longer than the ttl, the keys it
// took first stay held: they are renewed meanwhile. Once it returns, that
// renewal stops: the set is renewed only by its Extend.
//
// Guards against: taking the keys one by one with nothing renewing the
// earlier ones, which expire under a long wait (and LockAll then returns a
// set whose first key anyone may hold).
func TestLockAll_KeepsTheKeysItTookRenewedWhileItWaits(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, roomy)
	other := cl.client(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	var renewals atomic.Int32 // extend rounds carrying the first key (node 0's calls)
	f.before(func(_ context.Context, x *call) error {
		if x.Script == "extend" && x.Node == 0 && slices.Contains(x.Keys, keys[0]) {
			renewals.Add(1)
		}
		return nil
	})
	lb, err := other.TryLock(ctx, keys[1], 5*time.Second)
	require.NoError(t, err)

	const ttl = 300 * time.Millisecond
	got := make(chan *LeaseSet, 1)
	go func() {
		s, err := c.LockAll(ctx, keys, ttl)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	cl.requireLineLen(t, keys[1], 1, "LockAll never waited for the second key")
	// A renewal every ttl/3: six of them span two ttls of waiting.
	require.Eventually(t, func() bool { return renewals.Load() >= 6 }, 5*time.Second, time.Millisecond,
		"the first key was not renewed while LockAll waited (%d renewals)", renewals.Load())
	ks, err := c.Inspect(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, VerdictHeld, ks.Verdict, "the first key expired while LockAll waited: %s", ks.Summary)

	require.NoError(t, lb.Release(ctx))
	var s *LeaseSet
	select {
	case s = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("LockAll did not get the second key once it was released")
	}
	require.NotNil(t, s)
	releaseOnCleanup(t, s)
	ls := s.Leases()
	require.Equal(t, ks.Holder, ls[0].Value(), "the first key's holder changed")
	require.True(t, ls[0].Deadline().After(time.Now()), "the first lease is past its deadline")
	for _, l := range ls {
		require.False(t, renewed(c, l), "LockAll left %s in the renewal", l.Key())
	}
	require.NoError(t, s.Release(ctx))
}

// LockAll that gives up (its ctx ends while it waits for the second key)
// releases the first key before it returns, and names the key it waited
// for.
func TestLockAll_ReleasesWhatItTookWhenItsCtxEnds(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	other := cl.client(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	lb, err := other.TryLock(ctx, keys[1], 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lb.Release(ctx) })

	lctx, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		_, err := c.LockAll(lctx, keys, 5*time.Second)
		failed <- err
	}()
	cl.requireLineLen(t, keys[1], 1, "LockAll never waited for the second key")
	cancel()
	var lerr error
	select {
	case lerr = <-failed:
	case <-time.After(5 * time.Second):
		t.Fatal("LockAll did not return when its ctx ended")
	}
	require.ErrorIs(t, lerr, ErrNotObtained)
	require.ErrorIs(t, lerr, context.Canceled)
	require.Contains(t, lerr.Error(), keyText(keys[1]))
	ks, err := c.Inspect(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, VerdictFree, ks.Verdict, "the first key is still held: %s", ks.Summary)
	require.False(t, renewedAny(c), "a lease of the failed call is still renewed")
}

// LockAll gives up when a key it took is lost while it waits for a later
// one, and releases the rest.
func TestLockAll_GivesUpWhenAnEarlierKeyIsLostWhileItWaits(t *testing.T) {
	cl := newCluster(t, 5)
	c, f := cl.ready(t, roomy)
	other := cl.client(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 3)
	var renewals atomic.Int32
	f.before(func(_ context.Context, x *call) error {
		if x.Script == "extend" && x.Node == 0 && slices.Contains(x.Keys, keys[1]) {
			renewals.Add(1)
		}
		return nil
	})
	lc, err := other.TryLock(ctx, keys[2], 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lc.Release(ctx) })

	failed := make(chan error, 1)
	go func() {
		_, err := c.LockAll(ctx, keys, 300*time.Millisecond)
		failed <- err
	}()
	cl.requireLineLen(t, keys[2], 1, "LockAll never waited for the last key")
	require.Eventually(t, func() bool { return renewals.Load() >= 1 }, 5*time.Second, time.Millisecond)
	// Another owner takes the second key on every node: its next renewal
	// finds it lost. (A deleted key would not do: an extend sets the key
	// again on a node that missed its last round, as after a restart, and
	// under load a round can miss nodes.)
	cl.set(t, keys[1], "thief", time.Minute, cl.all()...)
	var lerr error
	select {
	case lerr = <-failed:
	case <-time.After(5 * time.Second):
		t.Fatal("LockAll went on waiting after an earlier key was lost")
	}
	require.ErrorIs(t, lerr, ErrNotObtained)
	require.ErrorIs(t, lerr, ErrNotHeld)
	require.Contains(t, lerr.Error(), keyText(keys[1])+" was lost")
	ks, err := c.Inspect(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, VerdictFree, ks.Verdict, "the first key is still held: %s", ks.Summary)
}

// The set's Deadline is the earliest of its leases' deadlines, whichever
// lease that is, and follows Extend.
//
// Guards against: a set deadline taken from one lease (the last key's,
// or the first's), which promises the holder time another key no longer
// has.
func TestLeaseSet_DeadlineIsTheEarliestOfItsLeases(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	s, err := c.TryLockAll(ctx, setKeys(t, 3), time.Second)
	require.NoError(t, err)
	releaseOnCleanup(t, s)
	ls := s.Leases()
	earliest := func() time.Time {
		d := ls[0].Deadline()
		for _, l := range ls[1:] {
			if l.Deadline().Before(d) {
				d = l.Deadline()
			}
		}
		return d
	}
	require.Equal(t, earliest(), s.Deadline())
	// The last key's lease runs longest: the set ends with an earlier one.
	require.NoError(t, ls[2].Extend(ctx, 3*time.Second))
	require.True(t, ls[2].Deadline().After(ls[0].Deadline()))
	require.Equal(t, earliest(), s.Deadline())
	require.True(t, s.Deadline().Before(ls[2].Deadline()), "the set trusts the last key's deadline")
	// Now the first key's runs longest too: the middle one ends first.
	require.NoError(t, ls[0].Extend(ctx, 3*time.Second))
	require.Equal(t, ls[1].Deadline(), s.Deadline(), "the set's deadline is not the middle lease's, the earliest")
	// Extend of the set: the minimum again.
	require.NoError(t, s.Extend(ctx, 2*time.Second))
	require.Equal(t, earliest(), s.Deadline())
	require.True(t, s.Deadline().After(time.Now().Add(time.Second)))
}

// Done closes as soon as any one lease ends, here released on its own.
func TestLeaseSet_DoneClosesWhenAnyLeaseEnds(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	s, err := c.TryLockAll(ctx, setKeys(t, 3), time.Second)
	require.NoError(t, err)
	releaseOnCleanup(t, s)
	select {
	case <-s.Done():
		t.Fatal("Done closed on a live set")
	default:
	}
	require.NoError(t, s.Leases()[1].Release(ctx))
	requireSetDone(t, s, "after one lease was released")
	// The other leases are the holder's to release: Release gives them
	// back and reports the one already released.
	require.ErrorIs(t, s.Release(ctx), ErrNotHeld)
	for _, l := range s.Leases() {
		cl.requireGone(t, l.Key(), "after the set's Release")
	}
}

// An Extend that fails on one key ends the set: Done closes, every lease
// is released, and the error wraps ErrNotHeld and names the key.
func TestLeaseSet_AFailedExtendEndsTheSet(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 3)
	s, err := c.TryLockAll(ctx, keys, 2*time.Second)
	require.NoError(t, err)
	releaseOnCleanup(t, s)
	for _, k := range keys {
		cl.requireHeld(t, k) // every node, so that the thief's key below is the only one
	}
	cl.set(t, keys[1], "thief", time.Minute, cl.all()...)
	err = s.Extend(ctx, 2*time.Second)
	require.ErrorIs(t, err, ErrNotHeld)
	require.Contains(t, err.Error(), "failed on "+keyText(keys[1]))
	requireSetDone(t, s, "after a failed Extend")
	for _, k := range []string{keys[0], keys[2]} {
		cl.requireGone(t, k, "after the set's failed Extend")
	}
	require.Equal(t, "thief", cl.value(t, 0, keys[1]), "the thief's key was touched")
}

// DoAll cancels fn's ctx as soon as one of its leases is lost (here its
// key taken over on a majority of nodes), with a cause that names the key,
// and returns an error wrapping ErrNotHeld; the other keys are released.
func TestDoAll_CancelsFnWhenOneLeaseIsLost(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	keys := setKeys(t, 2)
	var cause error
	err := c.DoAll(context.Background(), keys, 300*time.Millisecond, func(ctx context.Context, s *LeaseSet) error {
		// Another owner holds the key on a majority. (Deleting it there
		// would not do under load: an extend sets the key again on a
		// node that missed its last round, as after a restart.)
		cl.set(t, keys[1], "thief", time.Minute, 0, 1, 2)
		select {
		case <-ctx.Done():
			cause = context.Cause(ctx)
			return ctx.Err()
		case <-time.After(5 * time.Second):
			return errors.New("fn's ctx outlived a lost lease of its set")
		}
	})
	require.ErrorIs(t, err, ErrNotHeld)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, cause, ErrNotHeld)
	require.Contains(t, cause.Error(), keyText(keys[1]))
	cl.requireGone(t, keys[0], "after DoAll")
	require.False(t, renewedAny(c), "DoAll left leases in the renewal")
}

// With fencing, each lease of a set carries its own key's token, minted by
// that key's counter: it is above the token of the key's single-key
// holder before it, and below the next one's.
func TestLeaseSet_FencingTokenPerKey(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy, WithFencing())
	ctx := context.Background()
	keys := setKeys(t, 2)
	// The second key has had holders before: its counter is ahead.
	for range 3 {
		l, err := c.TryLock(ctx, keys[1], time.Second)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
	}
	la, err := c.TryLock(ctx, keys[0], time.Second)
	require.NoError(t, err)
	before := la.FencingToken()
	require.NoError(t, la.Release(ctx))
	lb, err := c.TryLock(ctx, keys[1], time.Second)
	require.NoError(t, err)
	beforeB := lb.FencingToken()
	require.NoError(t, lb.Release(ctx))

	var prev []uint64
	for round := range 2 {
		s, err := c.TryLockAll(ctx, keys, time.Second)
		require.NoError(t, err)
		ls := s.Leases()
		tokens := []uint64{ls[0].FencingToken(), ls[1].FencingToken()}
		require.Greater(t, tokens[0], before, "round %d: the first key's token is not above its last holder's", round)
		require.Greater(t, tokens[1], beforeB, "round %d: the second key's token is not above its last holder's", round)
		for i, k := range keys {
			ks, err := c.Inspect(ctx, k)
			require.NoError(t, err)
			require.Equal(t, ks.MaxFence, tokens[i], "round %d: %s's token is not its own counter's", round, k)
		}
		if prev != nil {
			require.Greater(t, tokens[0], prev[0])
			require.Greater(t, tokens[1], prev[1])
		}
		prev = tokens
		require.NoError(t, s.Release(ctx))
	}
	// A single-key holder after the set is ordered after it.
	l, err := c.TryLock(ctx, keys[0], time.Second)
	require.NoError(t, err)
	require.Greater(t, l.FencingToken(), prev[0])
	require.NoError(t, l.Release(ctx))
}

// DoAll keeps every lease of its set renewed for as long as fn runs,
// across several ttls: the renewal that kept the first keys while the
// call waited goes on, and the last key joins it.
//
// Guards against: the last key (or the first ones) left out of DoAll's
// renewal, which ends fn's ctx one ttl into the section.
func TestDoAll_KeepsEveryLeaseRenewedWhileFnRuns(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(60*time.Millisecond))
	keys := setKeys(t, 3)
	err := c.DoAll(context.Background(), keys, 240*time.Millisecond, func(ctx context.Context, s *LeaseSet) error {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the set ended during a 900ms section with a 240ms ttl: %w", context.Cause(ctx))
		case <-time.After(900 * time.Millisecond): // the section's work
		}
		if !s.Deadline().After(time.Now()) {
			return errors.New("the set's deadline is behind")
		}
		return nil
	})
	require.NoError(t, err)
	for _, k := range keys {
		cl.requireGone(t, k, "after DoAll")
	}
	require.False(t, renewedAny(c), "DoAll left leases in the renewal")
}

// A panic in DoAll's fn stops the renewal and releases every key, then
// goes on.
func TestDoAll_APanicInFnReleasesEveryKey(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	func() {
		defer func() { require.Equal(t, "boom", recover()) }()
		_ = c.DoAll(ctx, keys, 10*time.Second, func(context.Context, *LeaseSet) error { panic("boom") })
	}()
	// The ttl is 10 s: only the release empties the nodes within 2 s.
	for _, k := range keys {
		cl.requireGone(t, k, "after the panic")
	}
	require.False(t, renewedAny(c), "the panic left leases in the renewal")
}

// WaitAtMost bounds LockAll as a whole, not each key's wait: the first
// key comes free after most of the bound has passed, the second never
// does, and the call gives up when the bound passes (not a whole bound
// after the first key), with the first key free again.
func TestLockAll_WaitAtMostBoundsTheWholeCall(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	other := cl.client(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	la, err := other.TryLock(ctx, keys[0], 10*time.Second)
	require.NoError(t, err)
	lb, err := other.TryLock(ctx, keys[1], 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lb.Release(ctx) })

	const bound = 2 * time.Second
	start := time.Now()
	failed := make(chan error, 1)
	go func() {
		_, err := c.LockAll(ctx, keys, 5*time.Second, WaitAtMost(bound))
		failed <- err
	}()
	cl.requireLineLen(t, keys[0], 1, "LockAll never waited for the first key")
	// The first key is freed half-way through the bound: a bound per key
	// would wait another whole bound for the second one.
	require.Eventually(t, func() bool { return time.Since(start) >= bound/2 }, 5*time.Second, time.Millisecond)
	require.NoError(t, la.Release(ctx))
	var lerr error
	select {
	case lerr = <-failed:
	case <-time.After(3 * bound):
		t.Fatal("LockAll did not return")
	}
	took := time.Since(start)
	require.ErrorIs(t, lerr, ErrNotObtained)
	require.True(t, IsHeld(lerr), "%v", lerr)
	require.Contains(t, lerr.Error(), keyText(keys[1]))
	require.Contains(t, lerr.Error(), "WaitAtMost")
	require.GreaterOrEqual(t, took, bound)
	require.Less(t, took, bound+bound/3, "LockAll waited past its bound: each key had a bound of its own")
	ks, err := c.Inspect(ctx, keys[0])
	require.NoError(t, err)
	require.Equal(t, VerdictFree, ks.Verdict, "the first key is still held: %s", ks.Summary)
}

// Nodes gone: with two of five nodes frozen (SIGSTOP) a set is still
// taken and released on the other three; with three frozen, TryLockAll
// gets nothing, says the lock service is unavailable rather than that
// someone holds the keys, and leaves no key behind on any node once the
// nodes answer again (the failed call's ttl, 5 s, outlasts the check).
func TestLeaseSet_WithNodesGone(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, roomy)
	ctx := context.Background()
	keys := setKeys(t, 2)
	resume := func(idx ...int) {
		for _, i := range idx {
			_ = cl.nodes[i].Resume()
		}
	}
	t.Cleanup(func() { resume(2, 3, 4) })

	require.NoError(t, cl.nodes[3].Pause())
	require.NoError(t, cl.nodes[4].Pause())
	s, err := c.TryLockAll(ctx, keys, time.Second)
	require.NoError(t, err, "three of five nodes answer")
	require.NoError(t, s.Release(ctx))

	require.NoError(t, cl.nodes[2].Pause())
	_, err = c.TryLockAll(ctx, keys, 5*time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.True(t, IsUnavailable(err), "three nodes frozen is the service down, not the keys held: %v", err)
	require.False(t, IsHeld(err), "%v", err)
	resume(2, 3, 4)
	for _, k := range keys {
		cl.requireGone(t, k, "after TryLockAll failed with three nodes frozen")
	}
}
