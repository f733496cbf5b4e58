package model

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The reconfiguration's defects that issue 31's review found on real
// redis-server, found by the explorer on the current protocol. Each test
// documents a known defect: it requires the counterexample, and is to be
// turned into a clean check of its scenario (requireClean) by the fix.

func knownDefect(t *testing.T, name string) Config {
	t.Helper()
	s, ok := KnownDefectNamed(name)
	require.True(t, ok, name)
	return s.Config
}

// R1: a change to a disjoint node list that stops after step 1 (or whose
// new nodes do not answer): a client of the new settings started after
// it finds its nodes bare and admits them by the first-admission path
// while a lease of the old settings is trusted.
func TestReconfig_FindsR1OnTheUnfixedProtocol(t *testing.T) {
	requireFound(t, knownDefect(t, "reconfig-disjoint"), "double grant")
}

// R1 with a client of the new settings that calls Bootstrap at every
// start: Bootstrap finds the new nodes bare and admits them at once.
func TestReconfig_FindsR1WithBootstrapAtEveryStartOnTheUnfixedProtocol(t *testing.T) {
	requireFound(t, knownDefect(t, "reconfig-bootstrap"), "double grant")
}

// R2: after a stop between the steps the node carries no trace of the old
// settings, so a rerun with a wrong --from-drift is accepted and stamps a
// hold-off shorter than the old leases.
func TestReconfig_FindsR2OnTheUnfixedProtocol(t *testing.T) {
	requireFound(t, knownDefect(t, "reconfig-rerun"), "double grant")
}

// R3: after S -> T finished, a stale S -> T run with another node list is
// taken for a rerun, and two node lists run under T.
func TestReconfig_FindsR3OnTheUnfixedProtocol(t *testing.T) {
	requireFound(t, knownDefect(t, "reconfig-stale"), "double grant")
}

// R3 as the review found it: the stale run's old list is the node that
// carries T, which answers its retire step with "already T" and keeps
// voting.
func TestReconfig_FindsR3ThroughANodeThatAnswersAlreadyOnTheUnfixedProtocol(t *testing.T) {
	cfg := knownDefect(t, "reconfig-stale")
	cfg.Reconfigs = cfg.Reconfigs[1:]
	requireFound(t, cfg, "double grant")
}

// R4: after a stop between the steps, a rerun with the old settings typed
// as the new ones returns nil ("nothing to change") and no client of the
// new settings ever locks.
func TestReconfig_FindsR4OnTheUnfixedProtocol(t *testing.T) {
	requireFound(t, knownDefect(t, "reconfig-same"), "liveness")
}

// I1: an entry re-pointed after New to a server another entry reaches
// answers with that server's identity, and counts for nothing.
func TestIdentity_ARePointedEntryCountsItsNewServerNever(t *testing.T) {
	requireClean(t, scenario(t, "repointed"))
}

// Without the check of the replies' identity an entry is verified once and
// never again: the re-pointed entry counts node 1 twice, beside client 0's
// lease.
func TestIdentity_FindsI1WithoutTheReplyIdentityCheck(t *testing.T) {
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
	requireClean(t, scenario(t, "reconfig-done"))
}

// reconfigure.lua's finish without its hold-off check admits the new
// nodes with the new settings at once: the control finds the double
// grant.
func TestReconfig_FindsTheDoubleGrantWhenFinishIgnoresTheHoldOff(t *testing.T) {
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
	cfg := scenario(t, "reconfig-done")
	cfg.LiveReconfig = true
	cfg.Depth = len(cfg.Prefix) + 4
	requireClean(t, cfg)
}

// reconfigure.lua's finish that never admits: the bounded liveness of the
// complete run fails.
func TestReconfig_FindsTheLivenessFailureWhenFinishNeverAdmits(t *testing.T) {
	cfg := scenario(t, "reconfig-done")
	cfg.LiveReconfig = true
	cfg.Depth = len(cfg.Prefix) + 4
	cfg.Patches = map[string]func(string) string{"reconfigure": func(src string) string {
		return strings.Replace(src, "  if left > 0 then\n    return {0, left}\n  end\n", "  if true then\n    return {0, 1}\n  end\n", 1)
	}}
	requireFound(t, cfg, "liveness")
}

// R1 needs no stop: the command runs every step and every node answers,
// but step 2's call to the new node is slow. A client of the new
// settings started after step 1 finds the node bare and admits it by the
// first-admission path before the hold-off lands. (The prefix is the
// run up to step 2's call on the wire.)
func TestReconfig_FindsR1WithASlowStep2OnTheUnfixedProtocol(t *testing.T) {
	cfg := knownDefect(t, "reconfig-disjoint")
	cfg.Prefix = []string{
		"client 0 starts TryLock", "node 0 runs acquire of client 0",
		"the operator runs Reconfigure (run 1)", "node 0 runs look of Reconfigure (run 1)", "node 1 runs look of Reconfigure (run 1)",
		"node 0 runs reconfigure retire of Reconfigure (run 1)",
	}
	cfg.Depth = 18
	requireFound(t, cfg, "double grant")
}
