package election_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/election"
)

func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }

// deployment starts three bootstrapped nodes and returns a function that
// builds a Client over them (one per candidate, as separate processes
// would have), and the nodes.
func deployment(t *testing.T) (func() *redlock.Client, []*testenv.RedisNode) {
	t.Helper()
	nodes := testenv.RedisNodes(t, 3)
	client := func() *redlock.Client {
		var ucs []redis.UniversalClient
		for _, n := range nodes {
			ucs = append(ucs, n.Client(t))
		}
		c, err := redlock.New(ucs, redlock.WithNodeTimeout(200*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	require.NoError(t, client().Bootstrap(context.Background()))
	return client, nodes
}

// Two candidates: the first leads, the second waits until the first
// resigns and then leads with a larger term; Leader and Observe report
// each in turn.
func TestElection_OneLeaderAtATimeAndTermsGrow(t *testing.T) {
	client, _ := deployment(t)
	ctx := context.Background()
	name := testenv.Key(t)
	e1, e2 := candidate(t, client(), name), candidate(t, client(), name)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := e2.Observe(octx, 20*time.Millisecond)
	first := recv(t, seen)
	require.Empty(t, first.Value, "somebody led before anyone campaigned")

	l1, err := e1.Campaign(ctx, "node-a:8080")
	require.NoError(t, err)
	require.Positive(t, l1.FencingToken(), "a leadership carries a term")
	ld, err := e2.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, election.Leader{Value: "node-a:8080", Term: l1.FencingToken(), ExpiresIn: ld.ExpiresIn}, ld)
	require.Equal(t, "node-a:8080", recv(t, seen).Value)

	second := make(chan *redlock.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		l, err := e2.Campaign(ctx, "node-b:8080")
		errs <- err
		second <- l
	}()
	// The second candidate waits while the first leads, renewed past
	// its 2 s ttl.
	select {
	case err := <-errs:
		t.Fatalf("the second candidate led while the first did: %v", err)
	case <-time.After(3 * time.Second):
	}
	select {
	case <-l1.Done():
		t.Fatal("the first leadership ended while its holder ran")
	default:
	}

	require.NoError(t, l1.Release(ctx)) // resign
	require.NoError(t, <-errs)
	l2 := <-second
	require.Greater(t, l2.FencingToken(), l1.FencingToken(), "the next leader's term is larger")
	// Readings between the two leaderships, and of the new leader before
	// its term is committed on the nodes (the term read is still the one
	// before: seen once in a clean-clone CI run), may come first.
	next := recv(t, seen)
	for next.Value == "" || next.Term < l2.FencingToken() {
		next = recv(t, seen)
	}
	require.Equal(t, election.Leader{Value: "node-b:8080", Term: l2.FencingToken(), ExpiresIn: next.ExpiresIn}, next)
	require.NoError(t, l2.Release(ctx))
	_, err = e1.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)

	// Observe closes its channel once its ctx ends.
	stop()
	require.Eventually(t, func() bool {
		select {
		case _, ok := <-seen:
			return !ok
		default:
			return false
		}
	}, 5*time.Second, 5*time.Millisecond, "Observe's channel stayed open after its ctx ended")
}

// candidate is the election name on c, with a 2 s ttl.
func candidate(t *testing.T, c *redlock.Client, name string) *election.Election {
	t.Helper()
	e, err := election.New(c, name, 2*time.Second)
	require.NoError(t, err)
	return e
}

// recv is the next value from ch, failing t after 5 s without one.
func recv(t *testing.T, ch <-chan election.Leader) election.Leader {
	t.Helper()
	select {
	case ld, ok := <-ch:
		require.True(t, ok, "Observe's channel closed")
		return ld
	case <-time.After(5 * time.Second):
		t.Fatal("Observe sent nothing in 5 s")
		return election.Leader{}
	}
}

// With two of three nodes frozen nobody can tell who leads: Leader says
// so instead of ErrNoLeader (which would invite a takeover), Campaign
// gets no leadership, and Observe sends nothing for the readings that
// cannot tell, then the leader once the nodes answer again.
func TestElection_TooFewNodesCannotTell(t *testing.T) {
	client, nodes := deployment(t)
	ctx := context.Background()
	name := testenv.Key(t)
	e1, e2 := candidate(t, client(), name), candidate(t, client(), name)
	l, err := e1.Campaign(ctx, "a")
	require.NoError(t, err)
	defer func() { _ = l.Release(ctx) }()

	for _, n := range nodes[1:] {
		require.NoError(t, n.Pause())
	}
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			for _, n := range nodes[1:] {
				require.NoError(t, n.Resume())
			}
		}
	}
	defer thaw()
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = e2.Leader(rctx)
	cancel()
	require.Error(t, err)
	require.NotErrorIs(t, err, election.ErrNoLeader, "a reading of one node in three said nobody leads")
	require.ErrorContains(t, err, "cannot tell")

	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = e2.Campaign(cctx, "b")
	cancel()
	require.Error(t, err, "a candidate led with two of three nodes frozen")

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := e2.Observe(octx, 50*time.Millisecond)
	select {
	case ld := <-seen:
		t.Fatalf("Observe sent %+v while two of three nodes were frozen", ld)
	case <-time.After(300 * time.Millisecond):
	}
	thaw()
	require.Equal(t, "a", recv(t, seen).Value)
}

// A leadership whose keys are gone from a majority ends: its lease's Done
// closes at the next renewal, and the candidate may campaign again.
func TestElection_ALostLeadershipEnds(t *testing.T) {
	client, nodes := deployment(t)
	ctx := context.Background()
	name := testenv.Key(t)
	e, err := election.New(client(), name, 900*time.Millisecond)
	require.NoError(t, err)
	l, err := e.Campaign(ctx, "me")
	require.NoError(t, err)
	for _, n := range nodes {
		require.NoError(t, n.Client(t).Del(ctx, name).Err())
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the leadership did not end in 5 s with its keys gone")
	}
	l2, err := e.Campaign(ctx, "me again")
	require.NoError(t, err)
	require.Greater(t, l2.FencingToken(), l.FencingToken())
	require.NoError(t, l2.Release(ctx))
}

// Bad input is refused before any node is touched.
func TestElection_BadInput(t *testing.T) {
	client, _ := deployment(t)
	c := client()
	_, err := election.New(c, "", time.Second)
	require.Error(t, err)
	_, err = election.New(c, "x", 0)
	require.Error(t, err)
	_, err = election.New(nil, "x", time.Second)
	require.Error(t, err)
	e, err := election.New(c, testenv.Key(t), time.Second)
	require.NoError(t, err)
	_, err = e.Campaign(context.Background(), strings.Repeat("v", redlock.MaxMetadata+1))
	require.ErrorContains(t, err, "more than")
	_, err = e.Leader(context.Background())
	require.ErrorIs(t, err, election.ErrNoLeader, "the refused campaign left no leader")
}
