package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// One lease over several keys (multikey.go): two LockAlls over {a,b} and
// {b,a}, clean, and each of LockAll's guards taken out (setDefects), where
// the explorer finds the defect it prevents.

// requireStates requires the exploration's state count, as `make model`
// and docs/model.md report it; under the race detector requireClean
// explores a step less, and the count is not compared.
func requireStates(t *testing.T, cfg Config, want int) {
	t.Helper()
	if raceDetector {
		requireClean(t, cfg)
		return
	}
	r := explore(t, cfg)
	require.Empty(t, r.Violation, "%s", r.Trace)
	require.Equal(t, want, r.States, "the states explored changed: say why in docs/model.md")
}

// requireTrace requires the known defect's counterexample, with its
// length and the states explored to find it.
func requireTrace(t *testing.T, cfg Config, want string, steps, states int) {
	t.Helper()
	r := explore(t, cfg)
	require.Contains(t, r.Violation, want, "%s", r.Trace)
	require.Len(t, r.Trace, steps)
	require.Equal(t, states, r.States)
}

func TestSets_TwoClientsTwoKeysBothOrders(t *testing.T) {
	t.Parallel()
	requireStates(t, scenario(t, "sets"), 107535)
}

// Over three nodes, a majority's grants per key, without extends.
func TestSets_TwoClientsTwoKeysBothOrdersOnThreeNodes(t *testing.T) {
	t.Parallel()
	requireStates(t, scenario(t, "sets-three"), 119325)
}

// A LockAll over {a,b} beside a TryLock on a: the set and the single
// lease are ordered on a by a's key.
func TestSets_ASetAndASingleLeaseOnOneOfItsKeys(t *testing.T) {
	t.Parallel()
	requireStates(t, scenario(t, "sets-mixed"), 48842)
}

// With the set trusted until its last key's deadline, the single lease
// on a is the second holder of a.
func TestSets_FindsASingleLeaseBesideTheSetWithTheLastKeysDeadline(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "sets-mixed")
	cfg.SetDeadlineFromLast, cfg.ExclusionOnly = true, true
	requireTrace(t, cfg, "double grant of key a", 8, 2034)
}

// The clean scenario reaches what it is about within its bound: LockAll 0
// takes a then b, releases the set, and LockAll 1 (which listed {b,a})
// takes a then b.
func TestSets_BothSetsAreTakenInTurnWithinTheBound(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "sets")
	cfg.Prefix = []string{
		"client 0 starts TryLock", "node 0 runs acquire of client 0",
		"client 1 starts TryLock", "node 0 runs acquire of client 1",
		"LockAll 0 releases its set {a, b}", "node 0 runs release of client 0", "node 0 runs release of client 1",
		"client 2 starts TryLock", "node 0 runs acquire of client 2",
		"client 3 starts TryLock", "node 0 runs acquire of client 3 (attempt 1) at 0 ms: replies [1 0 n0]; client 3 hears it at once -> LEASE",
	}
	requireClean(t, cfg)
}

// Each LockAll takes its keys in its own listing order and waits while it
// holds: {a,b} holds a, {b,a} holds b, and neither's next try can ever
// succeed.
func TestSets_FindsTheDeadlockWithoutTheCanonicalOrder(t *testing.T) {
	t.Parallel()
	requireTrace(t, knownDefect(t, "sets-order"), "liveness: deadlock", 4, 37)
}

// The set trusted until the deadline of its last key: LockAll 0 took a a
// tick before b, a expires, and LockAll 1 takes a while LockAll 0 still
// trusts its set.
func TestSets_FindsTwoHoldersOfTheFirstKeyWithTheLastKeysDeadline(t *testing.T) {
	t.Parallel()
	requireTrace(t, knownDefect(t, "sets-deadline"), "double grant of key a", 8, 2817)
}

// Without ExclusionOnly the keys invariant finds it first: the set is
// trusted after its first key expired on the node.
func TestSets_FindsTheSetOutlivingItsFirstKeyWithTheLastKeysDeadline(t *testing.T) {
	t.Parallel()
	cfg := knownDefect(t, "sets-deadline")
	cfg.ExclusionOnly = false
	requireTrace(t, cfg, "a set outlives its keys", 6, 442)
}

func TestSets_AGivenUpOrReleasedSetLeavesNoKeyBehind(t *testing.T) {
	t.Parallel()
	requireStates(t, scenario(t, "sets-release"), 2027)
}

// A LockAll that gives up without releasing what it took: its key stays
// on the node, held by nobody.
func TestSets_FindsAKeyLeftBehindWithoutReleasingPartialHolds(t *testing.T) {
	t.Parallel()
	requireTrace(t, knownDefect(t, "sets-partial"), "leaves a key behind", 3, 35)
}

// The input a LockAll refuses before it touches a node is refused by the
// model too, and so are client clocks that run ahead (its parts share a
// clock).
func TestSets_TheModelRefusesALockAllItCannotRun(t *testing.T) {
	t.Parallel()
	for _, keys := range [][]string{{"a"}, {"a", "a"}, {"a", ""}} {
		cfg := scenario(t, "sets")
		cfg.Clients[0].Keys = keys
		_, err := Explore(cfg)
		require.Error(t, err, "%q", keys)
	}
	cfg := scenario(t, "sets")
	cfg.ClientSkew = 1
	_, err := Explore(cfg)
	require.ErrorContains(t, err, "share one clock")
}

// The same guards over three nodes (sets-three: no extends), where each
// key is a majority's: the deadlock and the double grant again.
func TestSets_FindsTheDeadlockAndTheDoubleGrantOnThreeNodes(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "sets-three")
	cfg.NoCanonicalOrder = true
	requireTrace(t, cfg, "liveness: deadlock", 8, 1740)
	cfg = scenario(t, "sets-three")
	cfg.SetDeadlineFromLast, cfg.ExclusionOnly = true, true
	requireTrace(t, cfg, "double grant of key a", 11, 77207)
}
