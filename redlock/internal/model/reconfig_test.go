package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reconfiguration's scenarios, R1-R4: each clean on the current
// protocol, and each found again when the guard that prevents it is taken
// out (known.go).

func knownDefect(t *testing.T, name string) Config {
	t.Helper()
	s, ok := KnownDefectNamed(name)
	require.True(t, ok, name)
	return s.Config
}

// R1: a change to a disjoint node list that stops at any step (or whose
// calls to the new node are slow): no client of the new settings started
// once step 1 is done admits the new node while a lease of the old
// settings is trusted.
func TestReconfig_ADisjointListGrantsNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-disjoint"))
}

// Without step 1's marks on the new nodes, a client of the new settings
// finds its node bare and admits it by the first-admission path while the
// lease of the old settings is trusted.
func TestReconfig_FindsR1WithoutTheMarksOnTheNewNodes(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-disjoint"), "double grant")
}

func TestReconfig_BootstrapAtEveryStartGrantsNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-bootstrap"))
}

// Without them, Bootstrap finds the new node bare and admits it at once.
func TestReconfig_FindsR1WithBootstrapAtEveryStartWithoutTheMarksOnTheNewNodes(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-bootstrap"), "double grant")
}

// R2: after a stop between the steps, reruns with the right and the wrong
// old settings: the wrong one is refused, and no lease of the new
// settings comes while the old lease is trusted.
func TestReconfig_ARerunWithOtherOldSettingsGrantsNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-rerun"))
}

// Without the change record the node carries no trace of the old
// settings, so the rerun with a wrong --from-drift is accepted and stamps a
// hold-off shorter than the old leases.
func TestReconfig_FindsR2WithoutTheChangeRecord(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-rerun"), "double grant")
}

// R3: after S -> T finished, a stale S -> T run with another node list is
// refused, whichever old list it names.
func TestReconfig_AStaleRunWithAnotherListGrantsNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-stale"))
}

// With a change record that names no node, the stale run is taken for a
// rerun, and two node lists run under T.
func TestReconfig_FindsR3WithARecordWithoutTheNodes(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-stale"), "double grant")
}

// R3 as the review found it: the stale run's old list is the node that
// carries T, which answers its retire step with "already T" and keeps
// voting.
func TestReconfig_FindsR3ThroughANodeThatAnswersAlreadyWithARecordWithoutTheNodes(t *testing.T) {
	t.Parallel()
	cfg := knownDefect(t, "reconfig-stale")
	cfg.Reconfigs = cfg.Reconfigs[1:]
	requireFound(t, cfg, "double grant")
}

// R4: after a stop between the steps, a rerun with the old settings typed
// as the new ones is refused, and every run that returns nil leaves a
// client of the new settings able to lock.
func TestReconfig_ARerunWithTheNewSettingsAsOldLeavesTheNewSettingsLive(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-same"))
}

// Without the change record it returns nil ("nothing to change") and no
// client of the new settings ever locks.
func TestReconfig_FindsR4WithoutTheChangeRecord(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-same"), "liveness")
}

// The old settings read from the node by reruns, one of them after the
// change finished ("already done"): no lease of T while the lease of S is
// trusted, and each run that returns nil leaves T able to lock.
func TestReconfig_ReadingTheOldSettingsAndAFinishedChangeGrantNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-read"))
}

// The same runs without the lease of S, so that the bounded liveness is
// checked after every run that returns nil, "already done" included.
func TestReconfig_ReadingTheOldSettingsLeavesTheNewSettingsLive(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "reconfig-read")
	cfg.Clients[0].Attempts = 0
	requireClean(t, cfg)
}

// A done rule that takes a node only marked "reconfiguring to T" for one
// that carries T: a rerun after a stop between the steps returns nil, no
// hold-off was ever stamped, and no client of T ever locks.
func TestReconfig_FindsADoneRerunThatLeavesTheNodeHeldOffWithoutTheFinishedRule(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-read"), "liveness")
}

// Old settings read from a node's marks, not from the change record: a
// rerun after a stop between the steps reads "reconfiguring to T" as T,
// and step 0 refuses a change from T to T on a node marked for it, so no
// run that reads the settings can finish the change.
func TestReconfig_FindsARefusedRerunWithoutTheChangeRecordsOldSettings(t *testing.T) {
	t.Parallel()
	requireFound(t, knownDefect(t, "reconfig-read-marks"), "was refused")
}

// I1: an entry re-pointed after New to a server another entry reaches
// answers with that server's identity, and counts for nothing.
func TestIdentity_ARePointedEntryCountsItsNewServerNever(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "repointed"))
}

// Without the check of the replies' identity an entry is verified once and
// never again: the re-pointed entry counts node 1 twice, beside client 0's
// lease.
func TestIdentity_FindsI1WithoutTheReplyIdentityCheck(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "repointed")
	cfg.NoReplyIdentity = true
	cfg.ExclusionOnly = true
	requireFound(t, cfg, "double grant")
}

// The control: a run that does every step with the right arguments, then
// clients of the new settings and time past the hold-off. The explorer
// reaches a lease of the new settings within the bound and finds no
// double grant.
func TestReconfig_ACompleteRunGrantsNoSecondLease(t *testing.T) {
	t.Parallel()
	requireClean(t, scenario(t, "reconfig-done"))
}

// reconfigure.lua's finish without its hold-off check admits the new
// nodes with the new settings at once: the control finds the double
// grant.
func TestReconfig_FindsTheDoubleGrantWhenFinishIgnoresTheHoldOff(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "reconfig-done")
	cfg.Patches = map[string]func(string) string{"reconfigure": func(src string) string {
		return strings.Replace(src, "  if left > 0 then\n    return {0, left}\n  end\n", "", 1)
	}}
	requireFound(t, cfg, "double grant")
}

// Once the complete run returned nil, a client of the new settings alone
// locks (the bounded liveness, which runs the model's finish path): a few
// steps past the run, since each state's check runs a client alone for
// up to a dozen ticks.
func TestReconfig_ACompleteRunLetsTheNewSettingsLock(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "reconfig-done")
	cfg.LiveReconfig = true
	cfg.Depth = len(cfg.Prefix) + 4
	requireClean(t, cfg)
}

// reconfigure.lua's finish that never admits: the bounded liveness of the
// complete run fails.
func TestReconfig_FindsTheLivenessFailureWhenFinishNeverAdmits(t *testing.T) {
	t.Parallel()
	cfg := scenario(t, "reconfig-done")
	cfg.LiveReconfig = true
	cfg.Depth = len(cfg.Prefix) + 4
	cfg.Patches = map[string]func(string) string{"reconfigure": func(src string) string {
		return strings.Replace(src, "  if left > 0 then\n    return {0, left}\n  end\n", "  if true then\n    return {0, 1}\n  end\n", 1)
	}}
	requireFound(t, cfg, "liveness")
}

// R1 needs no stop: the command runs every step and every node answers,
// but step 2's call to the new node is slow. Without step 1's marks, a
// client of the new settings started once step 1 is done finds the node
// bare and admits it by the first-admission path before the hold-off
// lands. (The prefix is the run up to step 2's call on the wire.)
func TestReconfig_FindsR1WithASlowStep2WithoutTheMarksOnTheNewNodes(t *testing.T) {
	t.Parallel()
	cfg := knownDefect(t, "reconfig-disjoint")
	cfg.Prefix = []string{
		"client 0 starts TryLock", "node 0 runs acquire of client 0",
		"the operator runs Reconfigure (run 1)", "node 0 runs look of Reconfigure (run 1)", "node 1 runs look of Reconfigure (run 1)",
		"node 0 runs reconfigure retire of Reconfigure (run 1)",
	}
	cfg.Depth = 18
	requireFound(t, cfg, "double grant")
}
