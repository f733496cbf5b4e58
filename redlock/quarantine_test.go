package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// The restart quarantine and admission: a node that lost its data votes
// again only one quarantine (max ttl plus its drift) after an attempt
// found it empty, under the deployment's settings only
// (docs/protocol.md, "The restart quarantine").

// TestQuarantine_RestartedNodeDoesNotVote is the Redlock spec's own
// counterexample: A holds exactly nodes 0, 1, 2; node 2 is killed and
// restarts empty; B asks nodes 2, 3, 4. Without the quarantine B is
// granted while A still holds; with it B is refused, and once the
// quarantine is over the node votes again.
func TestQuarantine_RestartedNodeDoesNotVote(t *testing.T) {
	for _, quarantine := range []bool{true, false} {
		t.Run(fmt.Sprintf("quarantine=%v", quarantine), func(t *testing.T) {
			// The counterexample needs A's lease to outlive node 2's
			// restart. A restart is 0.1-0.4 s on redis-server processes,
			// but a container's on a loaded machine took longer than 3 s
			// (a CI run beside a soak): then the scenario is run again,
			// on fresh nodes, with a longer lease.
			for _, ttl := range []time.Duration{3 * time.Second, 10 * time.Second, 30 * time.Second} {
				if restartedNodeDoesNotVote(t, quarantine, ttl) {
					return
				}
				t.Logf("node 2's restart took most of A's %v lease: again with a longer one", ttl)
			}
			t.Fatal("node 2's restarts outlasted a 30 s lease")
		})
	}
}

// restartedNodeDoesNotVote runs TestQuarantine_RestartedNodeDoesNotVote's
// scenario with leases of ttl, and reports false, having checked nothing,
// when the restart left too little of A's lease for the scenario.
func restartedNodeDoesNotVote(t *testing.T, quarantine bool, ttl time.Duration) bool {
	cl := newCluster(t, 5)
	opts := []Option{WithMaxTTL(ttl)}
	if !quarantine {
		opts = append(opts, withoutRestartQuarantine())
	}
	c, _ := cl.ready(t, opts...)
	ctx := context.Background()
	key := testenv.Key(t)
	// Someone else briefly holds nodes 3 and 4, so A wins exactly 0-2.
	cl.set(t, key, "other", 400*time.Millisecond, 3, 4)
	a, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err)
	aVal := valueOf(a)
	require.Equal(t, []string{aVal, aVal, aVal}, cl.values(t, []int{0, 1, 2}, key))
	cl.restartEmpty(t, 2)
	// The other owner's keys expire.
	require.Eventually(t, func() bool { return cl.value(t, 3, key) == "" && cl.value(t, 4, key) == "" }, 5*time.Second, 10*time.Millisecond)
	if time.Until(a.Deadline()) < ttl/3 {
		return false
	}
	b, err := c.TryLock(ctx, key, ttl)
	if !quarantine {
		require.NoError(t, err, "expected the unsafe double grant without quarantine")
		require.True(t, time.Now().Before(a.Deadline()), "A's lease ended before the double grant: test too slow")
		// The double grant, on the nodes: A still holds 0 and 1, B
		// (which could only win 2, 3 and 4) holds those three.
		require.Equal(t, []string{aVal, aVal}, cl.values(t, []int{0, 1}, key))
		bVal := valueOf(b)
		require.NotEqual(t, aVal, bVal)
		require.Equal(t, []string{bVal, bVal, bVal}, cl.values(t, []int{2, 3, 4}, key))
		require.NoError(t, b.Release(ctx))
		return true
	}
	require.ErrorIs(t, err, ErrNotObtained, "double grant while A holds the lock")
	require.ErrorIs(t, err, ErrNodeQuarantined)
	// A now holds only nodes 0 and 1, so its Release reports that
	// a majority no longer has its value.
	require.ErrorIs(t, a.Release(ctx), ErrNotHeld)
	// After the quarantine the restarted node votes again.
	require.Eventually(t, func() bool {
		ks, err := c.Inspect(ctx, key)
		return err == nil && ks.Nodes[2].Admission == AdmissionAdmitted
	}, 3*ttl, 50*time.Millisecond, "node 2 never re-admitted")
	cl.hold(t, key, time.Minute, 0, 1)
	l, err := c.TryLock(ctx, key, ttl)
	require.NoError(t, err, "the re-admitted node does not vote")
	require.NoError(t, l.Release(ctx))
	return true
}

// A new deployment with one node of five down: the round is decided once
// the down node and two of the quarantined ones are heard, before the
// other two answer. The four answering nodes are in quarantine, which is
// what stands in the way (the down node alone could not stop a majority),
// so the reason is the quarantine, with the down node named as well. It
// was no_quorum ("1 of 5 nodes unreachable"), as if the lock service were
// down.
func TestQuarantine_ANewDeploymentWithANodeDownSaysQuarantine(t *testing.T) {
	cl := newCluster(t, 5)
	// Frozen rather than killed: New cannot dial a killed node, and
	// go-redis then redials it in the background for a second after
	// Close, which goleak reports when this test runs alone. A node New's
	// probe did not hear is not waited for either.
	cl.freeze(t, 4)
	c := cl.client(t, WithMaxTTL(time.Minute))
	ctx := context.Background()
	key := testenv.Key(t)
	for range 3 {
		_, err := c.TryLock(ctx, key, time.Second)
		var e *NotObtainedError
		require.ErrorAs(t, err, &e)
		require.Equal(t, ReasonQuarantine, e.Reason, "%v", err)
		require.ErrorIs(t, err, ErrNodeQuarantined)
		require.True(t, IsUnavailable(err))
		require.False(t, IsHeld(err))
		require.Contains(t, e.Detail, "restart quarantine")
		require.Contains(t, e.Detail, "unreachable")
		require.Positive(t, e.Wait, "no hint of when the quarantine ends")
	}

	// Three down (two more frozen): the two left could not make a
	// majority even once admitted, so the service is what failed. An
	// attempt can be decided before the frozen nodes' calls run out of
	// time (the nodes it did not hear count as neither down nor in
	// quarantine, so it may still name the quarantine); once the client
	// has seen them miss a deadline, the reason is no_quorum.
	cl.freeze(t, 2, 3)
	var reasons []Reason
	for range 5 {
		_, err := c.TryLock(ctx, key, time.Second)
		var e *NotObtainedError
		require.ErrorAs(t, err, &e)
		require.True(t, IsUnavailable(err))
		reasons = append(reasons, e.Reason)
		if e.Reason == ReasonNoQuorum {
			break
		}
	}
	require.Equal(t, ReasonNoQuorum, reasons[len(reasons)-1], "three of five nodes down, and every attempt named another reason: %v", reasons)
	t.Logf("reasons after the freeze: %v", reasons)
}

// A deployment nobody has used cannot be told from one whose every node
// lost its data, so its nodes serve one quarantine from first use, after
// which Lock gets the lock without any extra call.
func TestQuarantine_ANewDeploymentServesOne(t *testing.T) {
	const maxTTL = 200 * time.Millisecond
	cl := newCluster(t, 5)
	c := cl.client(t, WithMaxTTL(maxTTL))
	ctx := context.Background()
	key := testenv.Key(t)
	start := time.Now()
	_, err := c.TryLock(ctx, key, maxTTL)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonQuarantine, e.Reason)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	require.Positive(t, e.Wait, "no hint of when the quarantine ends")
	require.LessOrEqual(t, e.Wait, quarantineOf(c))

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, key, maxTTL)
	require.NoError(t, err, "the new deployment never became usable")
	require.GreaterOrEqual(t, time.Since(start), quarantineOf(c), "admitted before one quarantine had passed")
	require.NoError(t, l.Release(ctx))
	for i := range 5 {
		// The lock needed three; the other two are admitted in the background.
		require.Eventually(t, func() bool { return cl.value(t, i, keyMarker) == deploymentOf(c) },
			time.Second, time.Millisecond, "node %d not admitted", i)
	}
}

// A Lock that meets a quarantine sleeps until it ends: nothing a node
// can grant changes before then. It tried every retry delay (20-100 ms),
// 285 attempts in a 20 s quarantine by a newcomer's count.
func TestQuarantine_ALockSleepsUntilItEnds(t *testing.T) {
	const maxTTL = time.Second
	cl := newCluster(t, 3)
	c, f := cl.faulty(t, WithMaxTTL(maxTTL))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.Lock(ctx, testenv.Key(t), maxTTL)
	require.NoError(t, err, "the new deployment never became usable")
	// The first attempt starts the quarantines, and one more follows at
	// once (the release notices were not listened for before it); the
	// attempt after the quarantine ends admits the nodes and tries again.
	// Allow two more per node for attempts that found the quarantine not
	// quite over on a node's clock. Polling made 10 to 50.
	for i := range 3 {
		require.LessOrEqual(t, f.count("acquire", i), int64(6),
			"node %d got %d acquire calls during one %v quarantine (%s)", i, f.count("acquire", i), quarantineOf(c), f.breakdown())
	}
	require.NoError(t, l.Release(context.Background()))
}

// The sleep is only for a quarantine that is all there is: a node that was
// down, not waited for or not verified may come back before it ends and
// make a majority with the admitted nodes, and the call keeps trying for
// it.
func TestQuarantine_ALockSleepsOnlyWhenTheQuarantineIsAllThereIs(t *testing.T) {
	q := func(i int) error { return &NodeError{Node: i, Err: ErrNodeQuarantined} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"every node answered, the rest in quarantine", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 3, Granted: 1, Errs: []error{q(1), q(2)}}, true},
		{"a hold-off", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 3, Errs: []error{&NodeError{Node: 0, Err: errHeldOff}, q(1), q(2)}}, true},
		{"a node down", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 3, Granted: 1, Errs: []error{q(1), &NodeError{Node: 2, Err: context.DeadlineExceeded}}}, false},
		{"a round decided without one node", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 2, Errs: []error{q(0), q(1)}}, true},
		{"a node not waited for", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 2, Errs: []error{q(0), q(1), &NodeError{Node: 2, Err: errNotWaited}}}, false},
		{"a node not verified yet", &NotObtainedError{Reason: ReasonQuarantine, Nodes: 3, Replied: 3, Errs: []error{q(0), q(1), &NodeError{Node: 2, Err: errUnverified}}}, false},
		{"held", &NotObtainedError{Reason: ReasonHeld, Nodes: 3, Replied: 3}, false},
	} {
		require.Equal(t, tc.want, onlyQuarantine(tc.err), tc.name)
	}
}

func TestQuarantine_ASingleNodeServesOne(t *testing.T) {
	cl := newCluster(t, 1)
	c := cl.client(t, WithMaxTTL(100*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	_, err := c.TryLock(ctx, key, 100*time.Millisecond)
	require.ErrorIs(t, err, ErrNodeQuarantined, "a lone node cannot be known to be new")
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, key, 100*time.Millisecond)
	require.NoError(t, err, "the lone node was never admitted")
	require.NoError(t, l.Release(ctx))
	require.Equal(t, deploymentOf(c), cl.value(t, 0, keyMarker))
}

// A quarantine started by one client can be finished by another: short-lived
// clients (quorumlock run) must not each restart the wait.
func TestQuarantine_SurvivesTheClientThatStartedIt(t *testing.T) {
	const maxTTL = 200 * time.Millisecond
	cl := newCluster(t, 5)
	c1, _ := cl.ready(t, WithMaxTTL(maxTTL))
	ctx := context.Background()
	key := testenv.Key(t)
	cl.wipe(t, 2)
	// Nodes 3 and 4 are held by someone else: every lock needs node 2.
	cl.hold(t, key, time.Minute, 3, 4)
	_, err := c1.TryLock(ctx, key, maxTTL) // finds node 2 empty: quarantine starts
	require.ErrorIs(t, err, ErrNodeQuarantined)
	require.Eventually(t, func() bool {
		n, err := cl.raw[2].Exists(ctx, keyPending).Result()
		return err == nil && n == 1
	}, time.Second, time.Millisecond)
	require.NoError(t, c1.Close())
	require.Empty(t, cl.value(t, 2, keyMarker), "node 2 admitted before its quarantine ended")

	cl.requireQuarantineOver(t, 2)
	c2 := cl.client(t, WithMaxTTL(maxTTL))
	_, err = c2.TryLock(ctx, key, maxTTL)
	require.NoError(t, err, "a new client did not finish the quarantine it found already served")
	require.Equal(t, deploymentOf(c2), cl.value(t, 2, keyMarker))
}

// servedQuarantineOnNode2 wipes node 2 of cl, holds a new key on nodes 3
// and 4 for someone else (so that every lock of it needs nodes 0, 1 and
// 2), starts node 2's quarantine with one refused TryLock of a client
// that is then closed, and waits until that quarantine is over: the next
// attempt on the key admits node 2 and tries once more.
func (cl *cluster) servedQuarantineOnNode2(t *testing.T, maxTTL time.Duration) string {
	t.Helper()
	c1, _ := cl.ready(t, WithMaxTTL(maxTTL))
	key := testenv.Key(t)
	cl.wipe(t, 2)
	cl.hold(t, key, time.Minute, 3, 4)
	_, err := c1.TryLock(context.Background(), key, maxTTL)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	require.NoError(t, c1.Close())
	cl.requireQuarantineOver(t, 2)
	return key
}

// An attempt that admits nodes whose quarantine is over tries once more at
// once; that second try waits for the first try's cleanup, or it finds the
// first try's key still on a node the cleanup has not reached and counts it
// as held by another owner (docs/protocol.md, "The try after an admission").
// Seen as a rare failure of the test above under load.
func TestQuarantine_TheTryAfterAnAdmissionWaitsForTheFirstCleanup(t *testing.T) {
	const maxTTL = 200 * time.Millisecond
	cl := newCluster(t, 5)
	ctx := context.Background()
	key := cl.servedQuarantineOnNode2(t, maxTTL)

	// A node timeout of 50 ms, not the default 10 ms of this ttl: under
	// load (CI runs the packages side by side) the lease's own Release
	// missed it on a node and was confirmed by 2 of the 3 nodes it held.
	c2, f := cl.faulty(t, WithMaxTTL(maxTTL), WithNodeTimeout(50*time.Millisecond))
	f.delay(300*time.Millisecond, "release", 0) // the first try's cleanup reaches node 0 late
	start := time.Now()
	l, err := c2.TryLock(ctx, key, maxTTL)
	require.NoError(t, err, "the second try found the first try's key on node 0")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "the second try did not wait for the cleanup: the test proves nothing")
	require.Equal(t, deploymentOf(c2), cl.value(t, 2, keyMarker))
	f.heal()
	require.NoError(t, l.Release(ctx))
}

// The same with a node frozen: the first try's cleanup then waits for the
// frozen node (its reply, then its release) only as long as the node and
// cleanup timeouts allow, so the second try still comes, and wins on the
// three nodes that answer.
func TestQuarantine_TheTryAfterAnAdmissionIsBoundedWithANodeFrozen(t *testing.T) {
	const maxTTL = 500 * time.Millisecond
	cl := newCluster(t, 5)
	ctx := context.Background()
	key := cl.servedQuarantineOnNode2(t, maxTTL)

	const nodeTimeout, cleanup = 100 * time.Millisecond, 200 * time.Millisecond
	c2 := cl.client(t, WithMaxTTL(maxTTL), WithNodeTimeout(nodeTimeout), WithCleanupTimeout(cleanup))
	cl.drop(t, key, 3)
	cl.freeze(t, 3) // node 3 free, but it does not answer
	start := time.Now()
	l, err := c2.TryLock(ctx, key, maxTTL)
	took := time.Since(start)
	require.NoError(t, err, "no lease on nodes 0-2 after node 2's admission, with node 3 frozen")
	t.Logf("TryLock took %v with node 3 frozen", took)
	// Two rounds and one admission, each bounded by the node timeout, plus
	// the cleanup's wait; a second apiece of slack for a loaded machine.
	require.Less(t, took, 4*nodeTimeout+cleanup+time.Second, "the second try waited past its bounds")
	require.Equal(t, deploymentOf(c2), cl.value(t, 2, keyMarker))
	cl.thaw(t, 3)
	require.NoError(t, l.Release(ctx))
}

// The first admission of a deployment needs every node to answer: with a
// node down, nothing shows whether it carries other settings, and the
// deployment waits (Bootstrap, or the node coming back, ends the wait).
func TestQuarantine_FirstAdmissionNeedsEveryPeer(t *testing.T) {
	const maxTTL = 100 * time.Millisecond
	cl := newCluster(t, 5)
	// 50 ms per node, not this ttl's default 5 ms, which the lease's
	// Release missed on two nodes under CI load.
	c, f := cl.faulty(t, WithMaxTTL(maxTTL), WithNodeTimeout(50*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	f.fail(errors.New("connection refused"), "", 4)
	_, err := c.TryLock(ctx, key, maxTTL)
	require.ErrorIs(t, err, ErrNodeQuarantined)
	// Once the quarantine is over, the client's background checks go on
	// failing for want of node 4: two more checks of each node (a pending
	// call each) mean that the first of them ran to its end.
	cl.requireQuarantineOver(t, 0, 1, 2, 3)
	var base [4]int64
	for i := range base {
		base[i] = f.count("pending", i)
	}
	require.Eventually(t, func() bool {
		for i := range base {
			if !cl.admittedOn(t, i) && f.count("pending", i) < base[i]+2 {
				return false
			}
		}
		return true
	}, 5*time.Second, time.Millisecond, "the client stopped checking the nodes after their quarantine")
	for i := range 4 {
		require.Empty(t, cl.value(t, i, keyMarker), "node %d admitted while a peer could not be asked", i)
	}
	f.heal()
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, key, maxTTL)
	require.NoError(t, err, "the deployment was not admitted once every node answered")
	require.NoError(t, l.Release(ctx))
}

// A quarantine another client started with other settings blocks the
// first admission: two fleets configured differently never both admit.
func TestQuarantine_FirstAdmissionRefusesOtherSettingsInProgress(t *testing.T) {
	const maxTTL = 100 * time.Millisecond
	cl := newCluster(t, 5)
	putPending(t, cl.raw[3], settingsString(5, 2*maxTTL, DefaultDriftFactor))
	// Node 3's answer decides the outcome: the default node timeout of
	// a 100 ms ttl, 5 ms, is missed on a loaded machine.
	c := cl.client(t, WithMaxTTL(maxTTL), WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	key := testenv.Key(t)
	_, err := c.TryLock(ctx, key, maxTTL)
	require.Error(t, err)
	// The client's background checks end once a quarantine's end shows
	// the settings in progress on node 3 (or, wrongly, admit the node).
	settled(t, c, 5*time.Second)
	for i := range 5 {
		require.Empty(t, cl.value(t, i, keyMarker), "node %d admitted while node 3 is being admitted with other settings", i)
	}
	_, err = c.TryLock(ctx, key, maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
}

func TestQuarantine_IsMaxTTLPlusItsDrift(t *testing.T) {
	q, err := Quarantine(time.Second, 0.01)
	require.NoError(t, err)
	require.Equal(t, time.Second+12*time.Millisecond, q)
	q, err = Quarantine(MaxMaxTTL, 0.5)
	require.NoError(t, err)
	require.Equal(t, MaxMaxTTL+MaxMaxTTL/2+2*time.Millisecond, q)
	_, err = Quarantine(MaxMaxTTL+time.Millisecond, 0.01)
	require.Error(t, err)
	_, err = Quarantine(time.Second, 1)
	require.Error(t, err)
}

// From a review: a client stalls between finding a node's quarantine over and running
// the admit script. Meanwhile another client admits the node, locks on it,
// and the node is wiped again. The stalled admission must not admit the
// wiped node: it would then grant a second lock while the first is valid.
func TestQuarantine_AStalledAdmissionCannotAdmitAWipedNode(t *testing.T) {
	cl := newCluster(t, 5)
	const maxTTL = 2 * time.Second
	// A broken admission must fail this test in seconds, not hang it until
	// the package's timeout: every wait below has a deadline, and the
	// stalled call is let go before the clients close (Close waits for
	// it).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	var unstall sync.Once
	s, sf := cl.faulty(t, WithMaxTTL(maxTTL))
	sf.before(func(_ context.Context, c *call) error {
		if c.Node != 0 || c.Script != "admit" {
			return nil
		}
		var err error
		once.Do(func() {
			// The admission stalls with its request already on the
			// wire (a paused process, a slow network): it reaches the
			// node later, whatever the caller's deadline says by then.
			close(entered)
			<-release
			err = c.answer(cl.replay(context.Background(), c))
			close(done)
		})
		return err
	})
	b := cl.client(t, WithMaxTTL(maxTTL))
	// Registered after the clients, so it runs before their Close.
	t.Cleanup(func() { unstall.Do(func() { close(release) }) })

	// S finds the new deployment and starts admitting node 0, then stalls
	// right before its admit script.
	_, _ = s.TryLock(ctx, "warm", maxTTL)
	select {
	case <-entered:
	case <-time.After(4 * maxTTL):
		t.Fatalf("the admission of node 0 never reached its admit script within %v", 4*maxTTL)
	}

	// B admits the nodes and locks exactly 0, 1, 2.
	key := testenv.Key(t)
	cl.hold(t, key, time.Minute, 3, 4)
	lctx, lcancel := context.WithTimeout(ctx, 4*maxTTL)
	defer lcancel()
	l1, err := b.Lock(lctx, key, maxTTL)
	require.NoError(t, err, "B was not granted the lock on nodes 0, 1, 2 within %v", 4*maxTTL)
	require.Equal(t, valueOf(l1), cl.value(t, 0, key))

	// Node 0 is wiped; then S's stalled admission goes on.
	cl.restartEmpty(t, 0)
	unstall.Do(func() { close(release) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled admission did not return within 10s of being let go")
	}
	require.False(t, cl.admittedOn(t, 0), "the stalled admission admitted a node that was wiped after it looked")

	// Nodes 3 and 4 free up: a lock on 0, 3, 4 would be a double grant.
	cl.drop(t, key, 3, 4)
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	defer tcancel()
	l2, err := s.TryLock(tctx, key, maxTTL)
	require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
	require.ErrorIs(t, err, ErrNotObtained, "double grant: %v and %v", l1, l2)
}

// From a review: two clients name the same nodes differently (here "tcp" and "tcp4").
// After a node restarts empty, the second client must still treat it as a
// node that may have forgotten a live lock.
func TestQuarantine_ANodeNamedTwoWaysStaysQuarantined(t *testing.T) {
	cl := newCluster(t, 5)
	const maxTTL = 3 * time.Second
	ctx := context.Background()
	network := func(nw string) func(*redis.Options) {
		return func(o *redis.Options) { o.Network = nw }
	}
	a, _ := cl.build(t, network("tcp"), WithMaxTTL(maxTTL))
	b, _ := cl.build(t, network("tcp4"), WithMaxTTL(maxTTL))
	lctx, cancel := context.WithTimeout(ctx, 4*maxTTL)
	defer cancel()
	warm, err := a.Lock(lctx, "warm", maxTTL) // admits the deployment
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	key := testenv.Key(t)
	cl.hold(t, key, time.Minute, 3, 4)
	l1, err := a.TryLock(ctx, key, maxTTL)
	require.NoError(t, err)
	cl.restartEmpty(t, 0)
	cl.drop(t, key, 3, 4)
	l2, err := b.TryLock(ctx, key, maxTTL)
	require.True(t, time.Now().Before(l1.Deadline()), "test too slow: the first lease ended before the check")
	require.ErrorIs(t, err, ErrNotObtained, "double grant under another name for node 0: %v and %v", l1, l2)
}

// From a review: nodes 0-3 restart one after another while the client that re-admits
// them cannot reach node 4; then node 4 restarts empty. It must not pass
// as a node that never granted anything.
func TestQuarantine_RollingRestartsKeepIt(t *testing.T) {
	cl := newCluster(t, 5)
	const maxTTL = time.Second
	ctx := context.Background()
	d := cl.client(t, WithMaxTTL(maxTTL))
	a, af := cl.faulty(t, WithMaxTTL(maxTTL))
	af.fail(errors.New("dial tcp: connection refused"), "", 4)
	lctx, cancel := context.WithTimeout(ctx, 4*maxTTL)
	defer cancel()
	warm, err := d.Lock(lctx, "warm", maxTTL)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	require.Eventually(t, func() bool {
		for i := range 5 {
			if !cl.admittedOn(t, i) {
				return false
			}
		}
		return true
	}, 4*maxTTL, 10*time.Millisecond)

	for i := range 4 {
		cl.restartEmpty(t, i)
		// A uses the lock until the restarted node is back.
		require.Eventually(t, func() bool {
			if l, err := a.TryLock(ctx, "roll", maxTTL); err == nil {
				require.NoError(t, l.Release(ctx))
			}
			return cl.admittedOn(t, i)
		}, 4*maxTTL, 20*time.Millisecond, "node %d not re-admitted", i)
	}

	// The check needs the first lease still valid when the second client
	// tries: a restart of node 4, a new Client's probes and a TryLock
	// within a 1 s lease. A stress run (four busy loops) once took
	// longer; then the grant proves nothing either way, and the check
	// runs again once node 4 is admitted again, up to three times.
	for try := 1; ; try++ {
		key := testenv.Key(t) + fmt.Sprint(try)
		cl.hold(t, key, time.Minute, 0, 1)
		l1, err := d.TryLock(ctx, key, maxTTL)
		require.NoError(t, err)
		require.Equal(t, valueOf(l1), cl.value(t, 4, key))
		cl.restartEmpty(t, 4)
		cl.drop(t, key, 0, 1)
		c := cl.client(t, WithMaxTTL(maxTTL))
		l2, err := c.TryLock(ctx, key, maxTTL)
		if time.Now().Before(l1.Deadline()) {
			require.ErrorIs(t, err, ErrNotObtained, "double grant through node 4: %v and %v", l1, l2)
			return
		}
		require.Less(t, try, 3, "test too slow three times: the first lease ended before the check")
		t.Logf("try %d: the first lease ended before the check; again", try)
		if l2 != nil {
			require.NoError(t, l2.Release(ctx))
		}
		require.Eventually(t, func() bool { // d reaches node 4, a does not
			if l, err := d.TryLock(ctx, "roll", maxTTL); err == nil {
				require.NoError(t, l.Release(ctx))
			}
			return cl.admittedOn(t, 4)
		}, 4*maxTTL, 20*time.Millisecond, "node 4 not re-admitted")
	}
}

// From a review: a client built with a shorter max ttl must not end a restarted node's
// quarantine early while a longer lease of another client is live.
func TestQuarantine_AShorterMaxTTLCannotShortenIt(t *testing.T) {
	cl := newCluster(t, 5)
	const long, short = 5 * time.Second, 300 * time.Millisecond
	ctx := context.Background()
	a := cl.client(t, WithMaxTTL(long))
	lctx, cancel := context.WithTimeout(ctx, 4*long)
	defer cancel()
	warm, err := a.Lock(lctx, "warm", long)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	// A majority admitted is enough for the warm-up's lease; the test
	// needs every node admitted (the others follow in the background).
	require.Eventually(t, func() bool {
		for i := range 5 {
			if !cl.admittedOn(t, i) {
				if l, err := a.TryLock(ctx, "warm", long); err == nil {
					require.NoError(t, l.Release(ctx))
				}
				return false
			}
		}
		return true
	}, 4*long, 20*time.Millisecond, "the nodes were not all admitted")

	key := testenv.Key(t)
	cl.hold(t, key, time.Minute, 3, 4)
	l1, err := a.TryLock(ctx, key, long)
	require.NoError(t, err)
	cl.restartEmpty(t, 0)
	cl.drop(t, key, 3, 4)
	b := cl.client(t, WithMaxTTL(short))
	// B keeps trying for several of its own quarantines.
	var bad string // what went wrong, once the condition said so
	if !assert.Never(t, func() bool {
		l2, err := b.TryLock(ctx, key, short)
		switch {
		case !time.Now().Before(l1.Deadline()):
			bad = "test too slow: the first lease ended before the check"
		case err == nil || l2 != nil:
			bad = fmt.Sprintf("double grant by a client with a shorter max ttl: %v and %v", l1, l2)
		default:
			return false
		}
		return true
	}, 1500*time.Millisecond, 50*time.Millisecond) {
		t.Fatal(bad)
	}
}

// A client with other settings cannot take over a deployment whose
// majority lost its data while one node still carries the deployment's
// settings: it is refused, the wiped nodes are never admitted under its
// settings, and the deployment's own clients re-admit them after one
// quarantine.
func TestQuarantine_OtherSettingsCannotTakeOverAWipedMajority(t *testing.T) {
	cl := newCluster(t, 5)
	const maxTTL, short = 1500 * time.Millisecond, 200 * time.Millisecond
	ctx := context.Background()
	a := cl.client(t, WithMaxTTL(maxTTL))
	require.NoError(t, a.Bootstrap(ctx))
	for _, i := range []int{0, 1, 2, 3} {
		cl.restartEmpty(t, i)
	}
	b := cl.client(t, WithMaxTTL(short))
	var bad string // what went wrong, once the condition said so
	if !assert.Never(t, func() bool {
		l, err := b.TryLock(ctx, "k", short)
		switch {
		case l != nil:
			bad = "a client with other settings got a lease"
		case err != nil && !errors.Is(err, ErrConfigMismatch) && !errors.Is(err, ErrNotObtained):
			bad = fmt.Sprintf("unexpected error class: %v", err)
		default:
			return false
		}
		return true
	}, 4*short, 20*time.Millisecond) {
		t.Fatal(bad)
	}
	// B's background admissions give up too: once they are over, no
	// wiped node carries B's settings.
	settled(t, b, 5*time.Second)
	for i := range 4 {
		if v := cl.value(t, i, keyMarker); v != "" && v != deploymentOf(a) {
			t.Fatalf("node %d admitted under %q", i, v)
		}
	}
	_, err := b.TryLock(ctx, "k", short)
	require.ErrorIs(t, err, ErrConfigMismatch, "node 4 still carries the deployment's settings")

	lctx, cancel := context.WithTimeout(ctx, 10*maxTTL)
	defer cancel()
	l, err := a.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "the deployment's own clients could not re-admit the wiped nodes")
	require.NoError(t, l.Release(ctx))
}

// Found by the nemesis: a client with other settings than the deployment's
// (refused with a ConfigError on the admitted nodes) started the
// quarantine of nodes that restarted empty under its own settings, and
// the deployment's own clients that had no admitted node in sight were
// then refused on those nodes ("is being admitted with ...") until the
// marks expired. A client that has met a node admitted under other
// settings starts no quarantine.
func TestQuarantine_AMisconfiguredClientStartsNone(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	a := cl.client(t, WithMaxTTL(maxTTL), WithNodeTimeout(200*time.Millisecond))
	require.NoError(t, a.Bootstrap(ctx))
	b := cl.client(t, WithMaxTTL(2*maxTTL), WithNodeTimeout(200*time.Millisecond))
	_, err := b.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		cl.restartEmpty(t, i)
	}
	_, err = b.TryLock(ctx, "k", maxTTL)
	require.Error(t, err)
	settled(t, b, 5*time.Second) // background admissions, if any, write their marks
	for i := range 5 {
		sett, err := cl.raw[i].HGet(ctx, keyPending, "settings").Result()
		if err == nil {
			require.NotEqual(t, deploymentOf(b), sett, "node %d: the misconfigured client started its quarantine", i)
		}
	}
	fresh := cl.client(t, WithMaxTTL(maxTTL), WithNodeTimeout(200*time.Millisecond))
	_, err = fresh.TryLock(ctx, "k", maxTTL)
	require.NotErrorIs(t, err, ErrConfigMismatch, "a client with the deployment's settings was refused")
	require.Eventually(t, func() bool {
		l, err := fresh.TryLock(ctx, "k", maxTTL)
		if err != nil {
			require.NotErrorIs(t, err, ErrConfigMismatch)
			return false
		}
		require.NoError(t, l.Release(ctx))
		return true
	}, 5*time.Second, 50*time.Millisecond, "the deployment's client never got the lock after the quarantine")
}

// The conflict that stops a client from starting quarantines is not for
// good: once the deployment is bootstrapped again with the client's
// settings, the client starts the quarantine of a node that restarted
// empty, as any client of the deployment does.
func TestQuarantine_AConflictEndsWhenTheDeploymentMatches(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	opt := WithNodeTimeout(200 * time.Millisecond)
	a := cl.client(t, WithMaxTTL(maxTTL), opt)
	require.NoError(t, a.Bootstrap(ctx))
	b := cl.client(t, WithMaxTTL(2*maxTTL), opt)
	_, err := b.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		cl.restartEmpty(t, i)
	}
	fresh := cl.client(t, WithMaxTTL(2*maxTTL), opt)
	require.NoError(t, fresh.Bootstrap(ctx)) // the operator moves the deployment to b's settings
	l, err := b.TryLock(ctx, "k", maxTTL)
	require.NoError(t, err, "b still refuses after the deployment took its settings")
	require.NoError(t, l.Release(ctx))
	cl.requireStartsQuarantine(t, b, "b started no quarantine on the restarted node")
}

// A client that met a node admitted under other settings keeps starting no
// quarantine after every node is wiped: with nothing left on the nodes it
// cannot tell its settings from the deployment's, so it waits (and its
// ConfigError names the settings it last saw). It is not stuck for good:
// once a client that has met no conflict re-admits the nodes under the
// same settings, the first node that answers admitted ends the conflict,
// without a Bootstrap.
func TestQuarantine_AConflictEndsWhenAPeerReadmitsUnderItsSettings(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 300 * time.Millisecond
	opt := WithNodeTimeout(200 * time.Millisecond)
	other := cl.client(t, WithMaxTTL(2*maxTTL), opt)
	require.NoError(t, other.Bootstrap(ctx))
	a := cl.client(t, WithMaxTTL(maxTTL), opt)
	_, err := a.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 5 {
		cl.restartEmpty(t, i)
	}
	_, err = a.TryLock(ctx, "k", maxTTL)
	require.ErrorIs(t, err, ErrConfigMismatch, "after a full wipe the conflicted client must still wait")
	for i := range 5 {
		_, err := cl.raw[i].HGet(ctx, keyPending, "settings").Result()
		require.ErrorIs(t, err, redis.Nil, "node %d: the conflicted client started a quarantine", i)
	}
	peer := cl.client(t, WithMaxTTL(maxTTL), opt)
	lctx, cancel := context.WithTimeout(ctx, 20*maxTTL)
	defer cancel()
	l, err := peer.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "a client without a conflict could not admit the wiped nodes")
	require.NoError(t, l.Release(ctx))
	l, err = a.Lock(lctx, "k", maxTTL)
	require.NoError(t, err, "a was not granted on nodes admitted under its settings")
	require.NoError(t, l.Release(ctx))
	cl.requireStartsQuarantine(t, a, "the conflict did not end: a started no quarantine on the restarted node")
}

// requireStartsQuarantine restarts node 0 empty and requires that c, on
// its next attempt, starts the node's quarantine under its own settings
// (or has already admitted it).
func (cl *cluster) requireStartsQuarantine(t *testing.T, c *Client, msg string) {
	t.Helper()
	ctx := context.Background()
	cl.restartEmpty(t, 0)
	_, _ = c.TryLock(ctx, "k", maxTTLOf(c)) // finds node 0 without its marker
	require.Eventually(t, func() bool {
		sett, err := cl.raw[0].HGet(ctx, keyPending, "settings").Result()
		return err == nil && sett == deploymentOf(c) || cl.admittedOn(t, 0)
	}, 3*time.Second, 20*time.Millisecond, msg)
}

// From a red-team review: a failed attempt decides at the third refusal,
// and a wiped node whose "not admitted" reply came after that never had
// its quarantine started: the attempt cancelled its round, so the late
// reply became "context canceled", and nothing looked at late replies of
// failed attempts anyway. A waiter whose calls to the wiped node are
// always a little slower than the others' kept the node out for as long
// as it waited (docs/protocol.md, Liveness: a wiped node is re-admitted one
// quarantine after the first attempt that reaches it, also when its reply
// arrives after the decision).
func TestQuarantine_AFailedAttemptStartsItOnANodeThatAnswersLate(t *testing.T) {
	cl := newCluster(t, 5)
	ctx := context.Background()
	const maxTTL = 2 * time.Second
	h := cl.client(t, WithMaxTTL(maxTTL))
	w, wf := cl.faulty(t, WithMaxTTL(maxTTL), WithRetry(func(int) time.Duration { return 100 * time.Millisecond }, 0))
	require.NoError(t, h.Bootstrap(ctx))
	key := testenv.Key(t)

	// The holder keeps the key for the whole test.
	hctx, stop := context.WithCancel(ctx)
	held := make(chan struct{})
	hdone := make(chan error, 1)
	go func() {
		hdone <- h.Do(hctx, key, maxTTL, func(fctx context.Context, _ *Lease) error {
			close(held)
			<-fctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() {
		stop()
		<-hdone
	})
	select {
	case <-held:
	case <-time.After(3 * time.Second):
		t.Fatal("the holder never got the key")
	}
	cl.requireHeld(t, key)

	cl.restartEmpty(t, 4)
	// Loaded, so that an attempt's call is one EVALSHA (one delay).
	loadScript(t, cl.raw[4], "acquire")
	// Well after the other nodes' refusals decided the attempt, well
	// within the node timeout (100 ms).
	wf.delay(50*time.Millisecond, "acquire", 4)
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := w.Lock(lctx, key, maxTTL)
	require.ErrorIs(t, err, ErrNotObtained)
	require.Eventually(t, func() bool {
		n, err := cl.raw[4].Exists(ctx, keyPending).Result()
		return err == nil && n == 1 || cl.admittedOn(t, 4)
	}, time.Second, 10*time.Millisecond, "the waiter's attempts reached the wiped node and never started its quarantine")
}

// From a review: a new deployment made the first Lock wait one quarantine
// in silence. The first refused attempt says so at once, once for the
// whole episode (not per node or attempt), with the time left, through
// WithQuarantineNotice and one Warn line; the error carries the time left
// and the remedy that works (waiting, not Bootstrap).
func TestQuarantine_ANewDeploymentSaysSoOnce(t *testing.T) {
	const maxTTL = 300 * time.Millisecond
	cl := newCluster(t, 5)
	var mu sync.Mutex
	var got []QuarantineNotice
	var log logs
	c := cl.client(t, WithMaxTTL(maxTTL), roomy, WithLogger(log.logger()), WithQuarantineNotice(func(n QuarantineNotice) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, n)
	}))
	ctx := context.Background()
	key := testenv.Key(t)
	_, err := c.TryLock(ctx, key, maxTTL)
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonQuarantine, e.Reason)
	require.Positive(t, e.Wait)
	t.Logf("TryLock on new nodes: %v", err)
	require.Contains(t, err.Error(), "the nodes admit themselves when the first quarantine ends, in "+e.Wait.Round(time.Millisecond).String())
	require.Contains(t, err.Error(), "Bootstrap admits only a deployment nobody has used yet")
	if e.Replied < e.Nodes {
		require.Contains(t, e.Detail, "at least ")
	}

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, key, maxTTL)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1, "one notice per episode: %+v", got)
	n := got[0]
	require.Equal(t, key, n.Key)
	require.Equal(t, 5, n.Nodes)
	require.GreaterOrEqual(t, n.Quarantined, 3)
	require.Positive(t, n.Left)
	require.LessOrEqual(t, n.Left, quarantineOf(c))
	warns := log.at(slog.LevelWarn, "quarantine")
	require.Len(t, warns, 1, "one Warn line per episode")
	var left time.Duration
	warns[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "left" {
			left = a.Value.Duration()
		}
		return true
	})
	require.Equal(t, n.Left, left, "the Warn line does not carry the time left")
}
