package redlock

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Reconfigure as an operator meets it: the old settings read from the
// nodes instead of typed, a finished change said to be done, and a
// client of the new settings told that it waits for a hold-off, not for
// nodes that lost their data.

// With no old settings given, Reconfigure reads them from the old nodes
// and sizes the hold-off from them: Q(S) = 1.01 s of the old max ttl of
// 1 s, not the quarantine of the default max ttl.
func TestReconfigure_ReadsTheOldSettingsFromTheNodes(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 1, 2, 3, 4}
	oldc := cl.deployed(t, newFaults(cl), oldIdx, WithMaxTTL(time.Second))
	var log logs
	cmd := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond), WithLogger(log.logger()))
	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx)))
	require.Equal(t, same(deploymentOf(cmd), 5), cl.markers(t, newIdx...))

	recs := log.at(slog.LevelInfo, "every node answered and can be moved")
	require.Len(t, recs, 1)
	attrs := recordAttrs(recs[0])
	require.Equal(t, deploymentOf(oldc), attrs["from"].String(), "the old settings read from the nodes")
	q, err := Quarantine(time.Second, DefaultDriftFactor)
	require.NoError(t, err)
	require.Equal(t, q, attrs["holdoff"].Duration(), "the hold-off is the old settings' quarantine")
}

// A rerun after a stop between the steps, with no old settings given,
// reads them from the change record the old nodes carry (they no longer
// carry the old settings themselves) and finishes the change; no lease of
// the new settings meanwhile.
func TestReconfigure_ARerunReadsTheOldSettingsFromTheChangeRecord(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 3, 4}
	key, l1, first := stoppedWithALease(t, cl, oldIdx, newIdx)
	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond), roomy)
	require.NoError(t, first.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx)))
	l2, at := lockAfter(t, newc, key, 300*time.Millisecond, 3*time.Second)
	require.False(t, at.Before(l1.Deadline()), "double grant: a lease of the new settings before the old lease's deadline")
	require.NoError(t, l2.Release(ctx))
}

// A run after the change finished says it is done (its log record
// step=done) and writes nothing: no step of reconfigure.lua is sent.
func TestReconfigure_AFinishedChangeIsAlreadyDone(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 3, 4}
	oldc := cl.deployed(t, newFaults(cl), oldIdx, WithMaxTTL(400*time.Millisecond))
	first := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(300*time.Millisecond))
	require.NoError(t, first.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx)))

	var log logs
	f, olds := newFaults(cl), newFaults(cl)
	again := cl.over(t, f, newIdx, WithMaxTTL(300*time.Millisecond), WithLogger(log.logger()))
	f.reset()
	for _, opts := range [][]Option{nil, {WithMaxTTL(400 * time.Millisecond)}} {
		require.NoError(t, again.Reconfigure(ctx, cl.hooked(t, olds, oldIdx), opts...))
	}
	require.Len(t, log.at(slog.LevelInfo, "already done"), 2)
	require.Zero(t, f.count("reconfigure", -1)+olds.count("reconfigure", -1), "a finished change was written again")
	require.Equal(t, []string{deploymentOf(again), deploymentOf(again), deploymentOf(again)}, cl.markers(t, newIdx...))

	// A client of the old settings is told that node 0 carries the new
	// settings and that the change retired nodes 1 and 2.
	ks, err := oldc.Inspect(ctx, testenv.Key(t))
	require.NoError(t, err)
	for i, ns := range ks.Nodes {
		require.Equal(t, AdmissionMismatch, ns.Admission, "node %d", i)
		if i == 0 {
			require.Equal(t, deploymentOf(again), ns.Settings)
			require.Empty(t, ns.ReconfiguringTo, "node 0 is admitted with the new settings, not marked")
			require.False(t, ns.Retired)
			continue
		}
		require.True(t, ns.Retired, "node %d left the list", i)
		require.Equal(t, deploymentOf(again), ns.ReconfiguringTo, "node %d", i)
	}
}

// Old nodes that record different settings, or as many nodes as the old
// list does not have, are refused with what each node says, and nothing
// is written.
func TestReconfigure_OldSettingsTheNodesDisagreeOnAreRefused(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 6)
	cl.deployed(t, newFaults(cl), []int{0, 1, 2}, WithMaxTTL(time.Second))
	other := cl.deployed(t, newFaults(cl), []int{3, 4, 5}, WithMaxTTL(2*time.Second))
	before := cl.markers(t, 0, 1, 2, 3, 4, 5)

	cmd := cl.over(t, newFaults(cl), []int{0, 1, 2}, WithMaxTTL(300*time.Millisecond))
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 3}))
	require.ErrorContains(t, err, "the old nodes record different settings")
	require.ErrorContains(t, err, deploymentOf(other))
	require.NotErrorIs(t, err, ErrReconfigureIncomplete, "running it again does not help")

	// Two of the three old nodes: the nodes say three.
	err = cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1}))
	require.ErrorContains(t, err, "admitted with 3 nodes, and 2 old nodes were given")
	require.Equal(t, before, cl.markers(t, 0, 1, 2, 3, 4, 5), "a refused run wrote")
}

// A client of the new settings that meets the hold-off is told so: its
// error says hold-off, its notice counts the held-off nodes, and Inspect
// reports them as reconfiguring with the time left, before and after the
// hold-off is stamped.
func TestReconfigure_TheNewClientsAreToldItIsAHoldOff(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	cl.deployed(t, newFaults(cl), idx, WithMaxTTL(2*time.Second))
	cctx, cancel := context.WithCancel(ctx)
	cmd := cl.over(t, stopAtHold(cl, cancel), idx, WithMaxTTL(time.Second))
	require.ErrorIs(t, cmd.Reconfigure(cctx, cl.hooked(t, newFaults(cl), idx)), ErrReconfigureIncomplete)

	var notices []QuarantineNotice
	var log logs
	newc := cl.over(t, newFaults(cl), idx, WithMaxTTL(time.Second), WithLogger(log.logger()),
		WithQuarantineNotice(func(n QuarantineNotice) { notices = append(notices, n) }))
	ks, err := newc.Inspect(ctx, testenv.Key(t))
	require.NoError(t, err)
	for _, ns := range ks.Nodes {
		require.Equal(t, AdmissionReconfiguring, ns.Admission)
		require.Equal(t, deploymentOf(newc), ns.ReconfiguringTo)
		require.False(t, ns.Retired)
		require.Equal(t, time.Duration(-1), ns.QuarantineLeft, "no hold-off is stamped yet")
	}

	// The rerun stamps the hold-off; stop it there too, to look at it.
	cctx, cancel = context.WithCancel(ctx)
	defer cancel()
	holdOff, err := Quarantine(2*time.Second, DefaultDriftFactor)
	require.NoError(t, err)
	stamped := make(chan error, 1)
	go func() { stamped <- cmd.Reconfigure(cctx, cl.hooked(t, newFaults(cl), idx)) }()
	require.Eventually(t, func() bool {
		ks, err := newc.Inspect(ctx, testenv.Key(t))
		return err == nil && ks.Nodes[2].QuarantineLeft > 0
	}, 5*time.Second, 5*time.Millisecond, "no hold-off stamped")
	ks, err = newc.Inspect(ctx, testenv.Key(t))
	require.NoError(t, err)
	for _, ns := range ks.Nodes {
		require.Equal(t, AdmissionReconfiguring, ns.Admission)
		require.Positive(t, ns.QuarantineLeft)
		require.LessOrEqual(t, ns.QuarantineLeft, holdOff)
	}

	_, err = newc.TryLock(ctx, testenv.Key(t), time.Second)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonQuarantine, e.Reason)
	require.Contains(t, e.Detail, "reconfiguration's hold-off")
	require.NotContains(t, e.Detail, "lost their data")
	require.Contains(t, e.Detail, "when the first hold-off ends")
	// A Lock that gives up says the same. Its last attempt may find its
	// ctx nearly over, too late to read how long is left (under make
	// stress it was), so only the hold-off is asserted here.
	lctx, lcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = newc.Lock(lctx, testenv.Key(t), time.Second)
	lcancel()
	require.ErrorAs(t, err, &e)
	require.Contains(t, e.Detail, "hold-off")
	require.NotEmpty(t, notices)
	require.True(t, notices[0].Reconfiguring(), "%+v", notices[0])
	require.Equal(t, notices[0].Quarantined, notices[0].HeldOff)
	require.Len(t, log.at(slog.LevelWarn, "hold-off of a reconfiguration"), 1)

	cancel()
	require.True(t, errors.Is(<-stamped, ErrReconfigureIncomplete))
}

// Reading the old settings needs enough old nodes that answer and record
// them: with two of three old nodes down it is incomplete, and with every
// old node wiped there is nothing to read; either way nothing is written.
func TestReconfigure_ReadingTheOldSettingsNeedsNodesThatRecordThem(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldc := cl.deployed(t, newFaults(cl), idx, WithMaxTTL(time.Second))
	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))

	down := newFaults(cl)
	down.fail(errors.New("connection refused"), "", 1, 2)
	err := cmd.Reconfigure(ctx, cl.hooked(t, down, idx))
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	require.ErrorContains(t, err, "only 1 of 3 old nodes answered, 2 must, to read the old settings")
	require.Equal(t, same(deploymentOf(oldc), 3), cl.markers(t, idx...), "an incomplete run wrote")

	for _, i := range idx {
		cl.wipe(t, i)
	}
	err = cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx))
	require.ErrorContains(t, err, "no old node that answered records its settings")
	require.NotErrorIs(t, err, ErrReconfigureIncomplete, "running it again does not help")
	require.Equal(t, same("", 3), cl.markers(t, idx...), "a refused run wrote")
}
