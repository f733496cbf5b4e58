package redlock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Changing the settings of a live deployment (reconfigure.go): the old
// clients are refused, the new ones lock after the hold-off, and no lease
// of the new settings is granted while one of the old is trusted.

// over is a Client over the given nodes of cl (by their index in cl), its
// node clients carrying f's hook under those same indexes.
func (cl *cluster) over(t *testing.T, f *faults, idx []int, opts ...Option) *Client {
	t.Helper()
	c, err := New(cl.hooked(t, f, idx), withTestNodeTimeout(opts)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	t.Cleanup(f.releaseAll)
	settleProofs(t, c)
	return c
}

// hooked returns a node client per index in idx, through f's hook.
func (cl *cluster) hooked(t *testing.T, f *faults, idx []int) []redis.UniversalClient {
	t.Helper()
	out := make([]redis.UniversalClient, len(idx))
	for k, i := range idx {
		rc := redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr()})
		rc.AddHook(nodeHook{f: f, node: i})
		t.Cleanup(func() { _ = rc.Close() })
		out[k] = rc
	}
	return out
}

// deployed is cl.over with the nodes then admitted by Bootstrap: a
// deployment of those settings in use, to reconfigure.
func (cl *cluster) deployed(t *testing.T, f *faults, idx []int, opts ...Option) *Client {
	t.Helper()
	c := cl.over(t, f, idx, opts...)
	require.NoError(t, c.Bootstrap(context.Background()))
	return c
}

func newFaults(cl *cluster) *faults { return &faults{n: len(cl.nodes), calls: map[scriptAt]int64{}} }

// markers reads the admission marker of the given nodes.
func (cl *cluster) markers(t *testing.T, idx ...int) []string { return cl.values(t, idx, keyMarker) }

// requireLocks requires c to get a lease on a fresh key at once, and
// gives it back: the settings c was built with grant.
func requireLocks(t *testing.T, c *Client, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	l, err := c.TryLock(ctx, testenv.Key(t), ttl)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
}

func same(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// lockAfter has c take key with TryLock, tried every 5 ms, and reports
// when the lease it got became trusted: when that TryLock returned. A
// double grant is two leases trusted at once, so the callers compare this
// with the old lease's deadline. (It used to report the start of that
// TryLock, which the protocol does not order: an attempt sent just before
// a hold-off ends is granted on nodes that run it just after, and under
// load, with the race detector and busy loops, one started 77 ms before
// the old deadline in TestReconfigure_AStalledCommandGrantsNoSecondLease.)
func lockAfter(t *testing.T, c *Client, key string, ttl, within time.Duration) (*Lease, time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var l *Lease
	var at time.Time
	var mu sync.Mutex
	var last error
	if !assert.Eventually(t, func() bool {
		got, err := c.TryLock(ctx, key, ttl)
		if err != nil {
			mu.Lock()
			last = err
			mu.Unlock()
			return false
		}
		l, at = got, time.Now()
		return true
	}, within, 5*time.Millisecond) {
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("no lease of the new settings within %v: %v", within, last)
	}
	return l, at
}

// reconfigureCase moves a deployment over oldIdx with oldTTL to newIdx with
// newTTL while a lease of the old settings is held, and checks what each
// side sees. The checks during the hold-off need it to last: a max ttl of
// about a second leaves them that long on a loaded machine.
func reconfigureCase(t *testing.T, cl *cluster, oldIdx, newIdx []int, oldTTL, newTTL time.Duration) {
	ctx := context.Background()
	oldOpts := []Option{WithMaxTTL(oldTTL)}
	oldc := cl.deployed(t, newFaults(cl), oldIdx, oldOpts...)
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, oldTTL)
	require.NoError(t, err)

	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(newTTL), roomy)
	cmd := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(newTTL))
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...) }()

	// During the hold-off: the old client is refused at once, the new one
	// is told it is a quarantine and how long is left.
	moving := script.Moving(newc.dep.marker)
	require.Eventually(t, func() bool {
		_, err := cl.raw[newIdx[0]].HGet(ctx, keyPending, "reconfigure").Result()
		return err == nil
	},
		2*time.Second, time.Millisecond, "no hold-off was stamped")
	_, err = oldc.TryLock(ctx, testenv.Key(t), oldTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	_, err = newc.TryLock(ctx, testenv.Key(t), newTTL)
	var ne *NotObtainedError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, ReasonQuarantine, ne.Reason, "%v", err)
	require.Greater(t, ne.Wait, time.Duration(0), "%v", err)
	require.Eventually(t, func() bool { return slices.Equal(same(moving, len(newIdx)), cl.markers(t, newIdx...)) },
		2*time.Second, time.Millisecond, "the new nodes are not all held off")
	// Bootstrap is no shortcut, from either side; a client of the new
	// settings that calls it at every start is told to wait (ErrNotNew,
	// the hold-off left), not refused.
	err = newc.Bootstrap(ctx)
	require.ErrorIs(t, err, ErrNotNew)
	require.NotErrorIs(t, err, ErrConfigMismatch)
	var nn *NotNewError
	require.ErrorAs(t, err, &nn)
	require.Len(t, nn.Nodes, len(newIdx))
	for _, n := range nn.Nodes {
		require.NoError(t, n.Err)
		require.Positive(t, n.Left, "node %d: no hold-off left", n.Node)
	}
	require.ErrorIs(t, oldc.Bootstrap(ctx), ErrConfigMismatch)
	require.Equal(t, same(moving, len(newIdx)), cl.markers(t, newIdx...))

	l2, at := lockAfter(t, newc, key, newTTL, 5*time.Second)
	require.True(t, at.After(l1.Deadline()), "a lease of the new settings was trusted %v before the old lease's deadline", l1.Deadline().Sub(at))
	t.Logf("first lease of the new settings %v after the command started", time.Since(start))
	require.NoError(t, <-done)
	require.NoError(t, l2.Release(ctx))
	require.Equal(t, same(newc.dep.marker, len(newIdx)), cl.markers(t, newIdx...))
	_, err = oldc.TryLock(ctx, testenv.Key(t), oldTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	// A rerun of a finished reconfiguration changes nothing.
	require.NoError(t, cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...))
	require.Equal(t, same(newc.dep.marker, len(newIdx)), cl.markers(t, newIdx...))
}

func TestReconfigure_ANewMaxTTL(t *testing.T) {
	cl := newCluster(t, 3)
	reconfigureCase(t, cl, []int{0, 1, 2}, []int{0, 1, 2}, time.Second, 300*time.Millisecond)
}

func TestReconfigure_ANodeReplacedByAFreshOne(t *testing.T) {
	cl := newCluster(t, 4)
	reconfigureCase(t, cl, []int{0, 1, 2}, []int{0, 1, 3}, time.Second, 1001*time.Millisecond)
	require.Equal(t, []string{script.Retired("v1 nodes=3 maxttl=1001ms drift=0.01")}, cl.markers(t, 2))
}

func TestReconfigure_NodesAdded(t *testing.T) {
	cl := newCluster(t, 5)
	reconfigureCase(t, cl, []int{0, 1, 2}, []int{0, 1, 2, 3, 4}, time.Second, time.Second)
}

// A node list that changes under unchanged settings is refused: the nodes
// could not tell a client of the old list from one of the new.
func TestReconfigure_RefusesANewNodeListWithTheSameSettings(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 4)
	oldc := cl.deployed(t, newFaults(cl), []int{0, 1, 2})
	cmd := cl.over(t, newFaults(cl), []int{0, 1, 3})
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}))
	require.ErrorContains(t, err, "change the max ttl or the drift factor together with the nodes")
	require.Equal(t, same(oldc.dep.marker, 3), cl.markers(t, 0, 1, 2))
	require.Equal(t, []string{""}, cl.markers(t, 3))
}

// The stall: the command is held while it refuses the old settings on two
// of the three old nodes; meanwhile an old client that does not hear from
// the third node locks on the two. No client of the new settings may get
// the key while that lease is trusted. A one-step version that stamps each
// node's hold-off as it reaches it lets the three nodes it reached finish
// their hold-offs and grant the new client while the old lease lives.
func TestReconfigure_AStalledCommandGrantsNoSecondLease(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 1, 2, 3, 4}
	oldOpts := []Option{WithMaxTTL(time.Second)}
	fold := newFaults(cl)
	oldc := cl.deployed(t, fold, oldIdx, oldOpts...)
	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(time.Second))

	// The command's calls to nodes 0 and 1, old and new entries alike,
	// stall until the test lets them go.
	fcmd := newFaults(cl)
	stall := make(chan struct{})
	var stalled sync.WaitGroup
	stalled.Add(2)
	var once [2]sync.Once
	fcmd.before(func(_ context.Context, c *call) error {
		if c.Script == "reconfigure" && c.Node < 2 {
			once[c.Node].Do(stalled.Done)
			<-stall
		}
		return nil
	})
	cmd := cl.over(t, fcmd, newIdx, WithMaxTTL(time.Second))
	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, fcmd, oldIdx), oldOpts...) }()
	stalled.Wait()

	// The old client does not hear from node 2; it locks on 0 and 1 late
	// into the stall, when the hold-offs a one-step command had stamped at
	// its start would be nearly over.
	time.Sleep(800 * time.Millisecond)
	fold.fail(errors.New("unreachable"), "acquire", 2)
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, time.Second)
	require.NoError(t, err, "the old client could not lock during the stall")
	close(stall)

	l2, at := lockAfter(t, newc, key, time.Second, 5*time.Second)
	require.True(t, at.After(l1.Deadline()), "double grant: a lease of the new settings was trusted %v before the old lease's deadline", l1.Deadline().Sub(at))
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, <-done)
}

// A command that stopped between its steps leaves every node refusing the
// old settings and no hold-off stamped: old clients are refused, new ones
// wait (no ConfigError). Running it again finishes the change.
func TestReconfigure_ARerunAfterAnInterruptionFinishesIt(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldOpts := []Option{WithMaxTTL(500 * time.Millisecond), roomy}
	oldc := cl.deployed(t, newFaults(cl), idx, oldOpts...)
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, 500*time.Millisecond)
	require.NoError(t, err)

	// The first run stops (its ctx ends) at the first hold-off it sends.
	fcmd := newFaults(cl)
	cctx, cancel := context.WithCancel(ctx)
	fcmd.before(func(ctx context.Context, c *call) error {
		if c.Script == "reconfigure" && len(c.Args) > 0 && c.Args[0] == "hold" {
			cancel()
			return ctx.Err()
		}
		return nil
	})
	cmd := cl.over(t, fcmd, idx, WithMaxTTL(300*time.Millisecond))
	err = cmd.Reconfigure(cctx, cl.hooked(t, newFaults(cl), idx), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	newc := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond), roomy)
	require.Equal(t, same(script.Moving(newc.dep.marker), 3), cl.markers(t, idx...))

	_, err = oldc.TryLock(ctx, testenv.Key(t), 500*time.Millisecond)
	require.ErrorIs(t, err, ErrConfigMismatch)
	_, err = newc.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NotErrorIs(t, err, ErrConfigMismatch)
	time.Sleep(time.Second) // past any hold-off: none was stamped
	_, err = newc.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	require.ErrorIs(t, err, ErrNotObtained, "a node was admitted without a hold-off")

	cmd2 := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))
	rerun := time.Now()
	require.NoError(t, cmd2.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), oldOpts...))
	require.GreaterOrEqual(t, time.Since(rerun), 500*time.Millisecond, "the rerun did not wait out the hold-off")
	require.Equal(t, same(newc.dep.marker, 3), cl.markers(t, idx...))
	l2, err := newc.TryLock(ctx, key, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, time.Now().After(l1.Deadline()))
	require.NoError(t, l2.Release(ctx))
}

// Without enough old nodes to refuse the old settings on all but a
// minority, the command writes nothing and the old clients go on.
func TestReconfigure_RefusedWithoutEnoughOldNodes(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldOpts := []Option{WithMaxTTL(500 * time.Millisecond), roomy}
	oldc := cl.deployed(t, newFaults(cl), idx, oldOpts...)

	fcmd := newFaults(cl)
	fcmd.fail(errors.New("connection refused"), "", 1, 2)
	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))
	err := cmd.Reconfigure(ctx, cl.hooked(t, fcmd, idx), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	require.ErrorContains(t, err, "only 1 of 3 old nodes answered and 2 must")
	require.ErrorContains(t, err, "nothing was written")
	require.Equal(t, same(oldc.dep.marker, 3), cl.markers(t, idx...))
	requireLocks(t, oldc, 500*time.Millisecond)
}

// A node that loses its data during the hold-off serves an ordinary
// quarantine of the new settings once a peer is admitted with them.
func TestReconfigure_ANodeWipedDuringTheHoldOffServesAQuarantine(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldOpts := []Option{WithMaxTTL(500 * time.Millisecond)}
	oldc := cl.deployed(t, newFaults(cl), idx, oldOpts...)
	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), oldOpts...) }()
	require.Eventually(t, func() bool { _, err := cl.raw[2].HGet(ctx, keyPending, "reconfigure").Result(); return err == nil },
		2*time.Second, time.Millisecond)
	cl.wipe(t, 2)
	err := <-done
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	newc := cl.over(t, newFaults(cl), idx, WithMaxTTL(300*time.Millisecond))
	require.Equal(t, []string{newc.dep.marker, newc.dep.marker, ""}, cl.markers(t, idx...))
	// The old client cannot take the wiped node back: its peers refuse
	// the old settings.
	_, err = oldc.TryLock(ctx, testenv.Key(t), 500*time.Millisecond)
	require.ErrorIs(t, err, ErrConfigMismatch)
	// The new client starts its quarantine and admits it one Q later.
	_, err = newc.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cl.markers(t, 2)[0] == newc.dep.marker }, 3*time.Second, 10*time.Millisecond)
}

// A new node that carried the new settings before the change (another
// deployment's, not this reconfiguration's) would vote for clients of the
// new settings at once, with no hold-off: refused, and nothing written.
func TestReconfigure_RefusesANodeThatAlreadyCarriesTheNewSettings(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldOpts := []Option{WithMaxTTL(500 * time.Millisecond), roomy}
	oldc := cl.deployed(t, newFaults(cl), []int{0, 1, 2}, oldOpts...)
	cmd := cl.over(t, newFaults(cl), cl.all(), WithMaxTTL(300*time.Millisecond))
	cl.set(t, keyMarker, cmd.dep.marker, 0, 3, 4)
	err := cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), []int{0, 1, 2}), oldOpts...)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.ErrorContains(t, err, "nothing was written")
	require.Equal(t, same(oldc.dep.marker, 3), cl.markers(t, 0, 1, 2))
	requireLocks(t, oldc, 500*time.Millisecond)
}

// A lease of the old settings whose holder keeps extending it (as Do's
// renewal does) must not outlive the change: nodes a reconfiguration
// marked renew nothing. Here the old lease holds nodes 0 and 1 (node 2 is
// cut off from its holder) and is extended every 200 ms; the first lease
// of the new settings, on nodes 2-4, must come after the old lease's last
// deadline. Without the marker check in extend.lua the extends go on
// succeeding and the new lease is granted while the old one is trusted.
func TestReconfigure_AnOldLeaseIsNotExtendedPastTheChange(t *testing.T) {
	oldLeaseExtendedThroughTheChange(t)
}

// The same with holder metadata: the extend call then carries the
// metadata keys after the marker (extend.lua KEYS[n+1], KEYS[n+1+i]), and
// a call that put them anywhere else would have the script read no
// marker and renew the old lease on marked nodes.
func TestReconfigure_AnOldLeaseWithMetadataIsNotExtendedPastTheChange(t *testing.T) {
	oldLeaseExtendedThroughTheChange(t, WithMetadata("host=old"))
}

func oldLeaseExtendedThroughTheChange(t *testing.T, opts ...CallOption) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 1, 2, 3, 4}
	oldOpts := []Option{WithMaxTTL(time.Second)}
	fold := newFaults(cl)
	oldc := cl.deployed(t, fold, oldIdx, oldOpts...)
	// New returns at a majority of answers: with node 2 cut off, the
	// lease needs nodes 0 and 1 both proven.
	require.Eventually(t, oldc.ident.allVerified, 2*time.Second, time.Millisecond, "the old client never verified every node")
	fold.fail(errors.New("unreachable"), "", 2)
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, time.Second, opts...)
	require.NoError(t, err)
	var mu sync.Mutex
	trusted := l1.Deadline()
	stop, extended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(extended)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if l1.Extend(ctx, time.Second) != nil {
				return
			}
			mu.Lock()
			trusted = l1.Deadline()
			mu.Unlock()
		}
	}()

	newc := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(time.Second))
	cmd := cl.over(t, newFaults(cl), newIdx, WithMaxTTL(time.Second))
	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...) }()
	l2, at := lockAfter(t, newc, key, time.Second, 6*time.Second)
	close(stop)
	<-extended
	mu.Lock()
	last := trusted
	mu.Unlock()
	require.True(t, at.After(last), "double grant: a lease of the new settings was trusted %v before the old lease's last deadline", last.Sub(at))
	require.NoError(t, l2.Release(ctx))
	require.NoError(t, <-done)
}

// A Lock call of the old settings that waits in line when the change
// begins is not handed the key by the holder's release once the nodes
// refuse those settings: a hand-off is a grant no acquire script checks.
// The waiter gets a reservation, tries, and is refused.
func TestReconfigure_AReleaseHandsNoKeyToAnOldWaiter(t *testing.T) {
	releaseToAnOldWaiter(t)
}

// The same with the holder's metadata: its release carries the metadata
// key after the marker (release.lua KEYS[6], KEYS[7]).
func TestReconfigure_AReleaseWithMetadataHandsNoKeyToAnOldWaiter(t *testing.T) {
	releaseToAnOldWaiter(t, WithMetadata("host=old"))
}

func releaseToAnOldWaiter(t *testing.T, opts ...CallOption) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	// The lease must outlive the waiter's first try, step 1 of the
	// command and the release; with a 1 s ttl it expired first under
	// load (the line was found empty).
	const ttl = 3 * time.Second
	oldOpts := []Option{WithMaxTTL(ttl), WithKeyHandOff()}
	holder := cl.deployed(t, newFaults(cl), idx, oldOpts...)
	waiter := cl.over(t, newFaults(cl), idx, append(oldOpts, slowRetry)...)
	key := testenv.Key(t)
	l1, err := holder.TryLock(ctx, key, ttl, opts...)
	require.NoError(t, err)
	cl.requireHeld(t, key) // TryLock returns at a majority: the waiter must find the key held on each
	// New returns at a majority of answers: the waiter's first try must
	// count every node, so that it joins the line on each.
	require.Eventually(t, waiter.ident.allVerified, 2*time.Second, time.Millisecond, "the waiter never verified every node")
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 3*ttl)
		defer cancel()
		l, err := waiter.Lock(wctx, key, ttl)
		if err == nil {
			_ = l.Release(ctx)
		}
		got <- err
	}()
	cl.requireLineLen(t, key, 1, "the waiter is not in line")

	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(ttl-100*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), WithMaxTTL(ttl)) }()
	moving := script.Moving(cmd.dep.marker)
	require.Eventually(t, func() bool { return slices.Equal(same(moving, 3), cl.markers(t, idx...)) },
		2*time.Second, time.Millisecond, "step 1 did not mark the nodes")
	require.NoError(t, l1.Release(ctx))
	require.ErrorIs(t, <-got, ErrConfigMismatch, "the old waiter was handed the key after the nodes refused its settings")
	require.NoError(t, <-done)
}

// An old node that stays loses its data between the command's steps:
// refused in step 1, bare when step 2 reaches it. The old client cannot
// take it back meanwhile (its peers refuse the old settings), step 2
// holds it off like the others, and the first lease of the new settings
// still comes after the old lease's deadline.
func TestReconfigure_ANodeWipedBetweenTheStepsIsHeldOffToo(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldOpts := []Option{WithMaxTTL(time.Second)}
	oldc := cl.over(t, newFaults(cl), idx, oldOpts...)
	require.NoError(t, oldc.Bootstrap(ctx))
	key := testenv.Key(t)
	l1, err := oldc.TryLock(ctx, key, time.Second)
	require.NoError(t, err)

	// The command's hold-off on node 2 waits until the test has wiped it.
	fcmd := newFaults(cl)
	reached, gate := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fcmd.before(func(_ context.Context, c *call) error {
		if c.Script == "reconfigure" && c.Node == 2 && len(c.Args) > 0 && c.Args[0] == "hold" {
			once.Do(func() { close(reached) })
			<-gate
		}
		return nil
	})
	cmd := cl.over(t, fcmd, idx, WithMaxTTL(900*time.Millisecond))
	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), idx), oldOpts...) }()
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		close(gate)
		t.Fatal("step 2 never reached node 2")
	}
	moving := script.Moving(cmd.dep.marker)
	require.Equal(t, moving, cl.markers(t, 2)[0], "step 1 did not refuse the old settings on node 2")
	cl.wipe(t, 2)
	_, err = oldc.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch, "the old client was not refused with node 2 bare")
	close(gate)

	require.NoError(t, <-done)
	newc := cl.over(t, newFaults(cl), idx, WithMaxTTL(900*time.Millisecond))
	require.Equal(t, same(newc.dep.marker, 3), cl.markers(t, idx...))
	l2, at := lockAfter(t, newc, key, 900*time.Millisecond, 5*time.Second)
	require.True(t, at.After(l1.Deadline()), "double grant: a lease of the new settings was trusted %v before the old lease's deadline", l1.Deadline().Sub(at))
	require.NoError(t, l2.Release(ctx))
	_, err = oldc.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
}

// Old settings that no old client could have run with, or no old nodes,
// are refused before any node is read or written: the hold-off and the
// markers would be computed from them.
func TestReconfigure_RefusesBadOldSettingsWithoutTouchingANode(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	idx := []int{0, 1, 2}
	oldc := cl.over(t, newFaults(cl), idx)
	require.NoError(t, oldc.Bootstrap(ctx))
	fcmd := newFaults(cl)
	cmd := cl.over(t, newFaults(cl), idx, WithMaxTTL(2*time.Second))
	for name, opts := range map[string][]Option{
		"a max ttl of 0":         {WithMaxTTL(0)},
		"a max ttl over the cap": {WithMaxTTL(MaxMaxTTL + time.Millisecond)},
		"a fractional max ttl":   {WithMaxTTL(1500 * time.Microsecond)},
		"a drift factor of 1":    {WithDriftFactor(1)},
		"no validity left":       {WithMaxTTL(2 * time.Millisecond)},
		"a nil option":           {nil},
	} {
		err := cmd.Reconfigure(ctx, cl.hooked(t, fcmd, idx), opts...)
		require.ErrorContains(t, err, "redlock: Reconfigure: old settings: ", name)
	}
	require.ErrorContains(t, cmd.Reconfigure(ctx, nil), "no old nodes")
	require.Zero(t, fcmd.total(), "an old node was called")
	require.Equal(t, same(oldc.dep.marker, 3), cl.markers(t, idx...))
}

// Old nodes that answer the command's first look and then go away before
// step 1 reaches them: step 1 marks too few of them, the command stops
// there (no hold-off is stamped), and the nodes it reached refuse clients
// of either settings. An old client that does not hear from the marked
// node still locks on the two old nodes that did not hear from the
// command, and the new clients could lock on the marked node and the two
// added ones (marked too, without a hold-off) without meeting that lease's
// key: only the rerun's hold-off keeps them out until its deadline. (A hold-off of the new, shorter
// quarantine alone would let them in about 500 ms early.)
func TestReconfigure_OldNodesGoneDuringStep1StopIt(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	oldIdx, newIdx := []int{0, 1, 2}, []int{0, 1, 2, 3, 4}
	oldOpts := []Option{WithMaxTTL(time.Second)}
	newOpts := []Option{WithMaxTTL(500 * time.Millisecond), roomy}
	oldc := cl.deployed(t, newFaults(cl), oldIdx, oldOpts...)

	fold := newFaults(cl)
	fold.fail(errors.New("connection reset by peer"), "reconfigure", 1, 2)
	cmd := cl.over(t, newFaults(cl), newIdx, newOpts...)
	err := cmd.Reconfigure(ctx, cl.hooked(t, fold, oldIdx), oldOpts...)
	require.ErrorIs(t, err, ErrReconfigureIncomplete)
	require.ErrorContains(t, err, "reached 1 of 3 old nodes (2 must)")
	var ne *NodeError
	require.ErrorAs(t, err, &ne)
	moving := script.Moving(cmd.dep.marker)
	require.Equal(t, []string{moving, oldc.dep.marker, oldc.dep.marker, moving, moving}, cl.markers(t, newIdx...))
	for _, i := range newIdx {
		_, err := cl.raw[i].HGet(ctx, keyPending, "reconfigure").Result()
		require.ErrorIs(t, err, redis.Nil, "node %d: a hold-off was stamped", i)
	}

	newc := cl.over(t, newFaults(cl), newIdx, newOpts...)
	_, err = newc.TryLock(ctx, testenv.Key(t), 500*time.Millisecond)
	require.Error(t, err, "a client of the new settings locked after step 1 stopped")

	fcut := newFaults(cl)
	fcut.fail(errors.New("unreachable"), "", 0)
	oldcut := cl.over(t, fcut, oldIdx, oldOpts...)
	key := testenv.Key(t)
	l1, err := oldcut.TryLock(ctx, key, time.Second)
	require.NoError(t, err, "an old client cut off from the marked node")

	done := make(chan error, 1)
	go func() { done <- cmd.Reconfigure(ctx, cl.hooked(t, newFaults(cl), oldIdx), oldOpts...) }()
	l2, at := lockAfter(t, newc, key, 500*time.Millisecond, 5*time.Second)
	require.True(t, at.After(l1.Deadline()), "double grant: a lease of the new settings was trusted %v before the deadline of the old lease taken after step 1 stopped", l1.Deadline().Sub(at))
	require.NoError(t, <-done)
	require.NoError(t, l2.Release(ctx))
	require.Equal(t, same(newc.dep.marker, 5), cl.markers(t, newIdx...))
}
