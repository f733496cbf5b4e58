package redlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// Nodes that refuse the client for a reason of configuration (a wrong
// password, an ACL without the scripts, a database the node lacks) are a
// configuration error, not contention: New fails when they leave no
// majority (and warns of a minority), and a refusal that starts later is typed on every per-node cause and, when it is why
// no majority granted, ends Lock at once with an error that matches
// ErrConfigMismatch and not ErrNotObtained. From a newcomer's review: one
// wrong password was silent, three made the CLI exit "try later".

// misconfigured is one way a node can refuse a client built over it.
type misconfigured struct {
	name    string
	args    []string                             // the node's redis-server arguments
	setup   func(t *testing.T, rc *redis.Client) // run on the node with a client that may
	options func(o *redis.Options)               // the refused client's options
	reply   string                               // the start of the node's refusal
}

var misconfigurations = []misconfigured{
	{name: "wrong password", setup: requirePass,
		options: func(o *redis.Options) { o.Password = "wrong" }, reply: "WRONGPASS"},
	{name: "no password", setup: requirePass,
		options: func(o *redis.Options) {}, reply: "NOAUTH"},
	{name: "acl user without scripting",
		setup: func(t *testing.T, rc *redis.Client) {
			require.NoError(t, rc.Do(context.Background(), "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-@scripting").Err())
		},
		options: func(o *redis.Options) { o.Username, o.Password = "app", "pw" }, reply: "NOPERM"},
	{name: "database out of range", args: []string{"--databases", "1"},
		options: func(o *redis.Options) { o.DB = 3 }, reply: "ERR DB index is out of range"},
}

// requirePass sets a password on a node once it is up (the harness's
// readiness check does not log in).
func requirePass(t *testing.T, rc *redis.Client) {
	require.NoError(t, rc.ConfigSet(context.Background(), "requirepass", "right").Err())
}

// refusingNode starts one node configured per m and returns a client over
// it built with m's options.
func refusingNode(t *testing.T, m misconfigured) (*redis.Client, string) {
	t.Helper()
	nd := testenv.Redis(t, testenv.WithRedisArgs(m.args...))
	if m.setup != nil {
		m.setup(t, nd.Client(t))
	}
	o := &redis.Options{Addr: nd.Addr()}
	m.options(o)
	rc := redis.NewClient(o)
	t.Cleanup(func() { _ = rc.Close() })
	return rc, nd.Addr()
}

// refusingDeployment is n nodes of which the first bad refuse the client
// per m: clients over them, with the good nodes answering only after a
// refusing one did, so that a loaded machine cannot turn the refusal into
// a late reply New did not wait for. It returns the refusing nodes'
// addresses.
func refusingDeployment(t *testing.T, m misconfigured, goodNodes []*testenv.RedisNode, bad int) ([]redis.UniversalClient, []string) {
	t.Helper()
	refused := make(chan struct{})
	once := &sync.Once{}
	var nodes []redis.UniversalClient
	var addrs []string
	for range bad {
		rc, addr := refusingNode(t, m)
		rc.AddHook(onError{once: once, then: func() { close(refused) }})
		nodes = append(nodes, rc)
		addrs = append(addrs, addr)
	}
	for _, nd := range goodNodes {
		gc := redis.NewClient(&redis.Options{Addr: nd.Addr()})
		t.Cleanup(func() { _ = gc.Close() })
		gc.AddHook(holdUntil{ready: refused})
		nodes = append(nodes, gc)
	}
	return nodes, addrs
}

// One node of five that refuses the client (a wrong password during a
// rotation, say) leaves four that grant: New goes on and says so in a
// Warn that names the node and its reply. It used to fail, and with it
// every client of the deployment.
func TestRefusal_NewGoesOnWhenAMinorityRefusesAndSaysSo(t *testing.T) {
	goodNodes := testenv.RedisNodes(t, 4)
	for _, m := range misconfigurations {
		t.Run(m.name, func(t *testing.T) {
			nodes, addrs := refusingDeployment(t, m, goodNodes, 1)
			var logs testenv.Buffer
			c, err := New(nodes, WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			require.NoError(t, err, "one refusing node of five stopped New")
			defer c.Close()
			out := logs.String()
			require.Contains(t, out, "node refused this client")
			require.Contains(t, out, addrs[0])
			require.Contains(t, out, m.reply)
			require.Equal(t, 1, strings.Count(out, "node refused this client"), "one Warn per refusing node: %s", out)

			// Inspect shows the node's own reply as its cause.
			ks, err := c.Inspect(context.Background(), testenv.Key(t))
			require.NoError(t, err)
			ns := ks.Nodes[0]
			require.ErrorIs(t, ns.Err, ErrNodeRefused, "Inspect's cause for the refusing node: %v", ns.Err)
			require.Contains(t, ns.Err.Error(), m.reply)
			require.Equal(t, AdmissionUnknown, ns.Admission)
			require.Contains(t, ks.Summary, "refused this client", "the summary calls a refusing node silent")
		})
	}
}

// Refusals that leave fewer nodes than a majority are a configuration
// error: New fails, names a refusing node and keeps its reply. A tool
// that reports on the deployment can still be built.
func TestRefusal_NewFailsWhenTheRefusalsLeaveNoMajority(t *testing.T) {
	goodNodes := testenv.RedisNodes(t, 2)
	for _, m := range misconfigurations {
		t.Run(m.name, func(t *testing.T) {
			nodes, addrs := refusingDeployment(t, m, goodNodes, 3)
			c, err := New(nodes)
			require.Nil(t, c)
			require.ErrorIs(t, err, ErrNodeRefused)
			var re *RefusalError
			require.ErrorAs(t, err, &re)
			require.True(t, strings.HasPrefix(re.Err.Error(), m.reply), "refusal %q, want %s", re.Err, m.reply)
			require.ErrorContains(t, err, "3 of 5 nodes refuse this client")
			require.ErrorContains(t, err, "node 0 ("+addrs[0]+")")

			c, err = New(nodes, WithoutRefusalCheck())
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

type onError struct {
	once *sync.Once
	then func()
}

func (h onError) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h onError) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && !errors.Is(err, redis.Nil) {
			h.once.Do(h.then)
		}
		return err
	}
}
func (h onError) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil && !errors.Is(e, redis.Nil) {
				h.once.Do(h.then)
			}
		}
		return err
	}
}

// holdUntil keeps every command of its client until ready is closed (or
// the command's ctx ends).
type holdUntil struct{ ready <-chan struct{} }

func (h holdUntil) wait(ctx context.Context) error {
	select {
	case <-h.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (h holdUntil) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h holdUntil) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if err := h.wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmd)
	}
}
func (h holdUntil) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if err := h.wait(ctx); err != nil {
			return err
		}
		return next(ctx, cmds)
	}
}

// denyScripts takes the scripts away from node i's default user (its ACL
// refuses them with NOPERM) until the test ends.
func (cl *cluster) denyScripts(t *testing.T, i int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, cl.raw[i].Do(ctx, "ACL", "SETUSER", "default", "-@scripting").Err())
	t.Cleanup(func() { _ = cl.raw[i].Do(ctx, "ACL", "SETUSER", "default", "+@all").Err() })
}

// A refusal that starts after New (here: the ACL takes the scripts away
// from the client's user) is typed on the per-node causes. With one node
// refusing the lock is still served by the others; with three, the
// refusals are why no majority granted: TryLock fails with ReasonRefused,
// which matches ErrConfigMismatch, and Lock returns at once instead of
// waiting for its ctx.
func TestRefusal_RefusalsAfterNewAreAConfigurationError(t *testing.T) {
	cl := newCluster(t, 5)
	// Whether a refusal is why an attempt failed is decided on every
	// node's answer: the 50 ms default of a 1 s ttl is missed under load.
	c, f := cl.ready(t, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()

	cl.denyScripts(t, 4)
	l, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err, "one refusing node of five must not stop the lock")
	require.NoError(t, l.Release(ctx))

	// Held elsewhere on two, refused on one: the refusal is what keeps
	// the other two from a majority.
	key := testenv.Key(t)
	cl.set(t, key, "other", time.Minute, 0, 1)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.ErrorIs(t, err, ErrNodeRefused, "the refusing node's cause is typed")

	// Held elsewhere on a majority: contention, which waiting can end,
	// even with a node refusing. (The refusal is held back so that the
	// attempt is decided without it.)
	key = testenv.Key(t)
	cl.set(t, key, "other", time.Minute, 0, 1, 2)
	f.delay(300*time.Millisecond, "", 4)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NotErrorIs(t, err, ErrConfigMismatch)
	f.heal()

	cl.denyScripts(t, 2)
	cl.denyScripts(t, 3)
	_, err = c.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.ErrorIs(t, err, ErrNodeRefused)
	require.NotErrorIs(t, err, ErrNotObtained, "a refusal is not contention: callers must not just try later")
	var ne *NotObtainedError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, ReasonRefused, ne.Reason)
	refused := map[int]bool{}
	for _, e := range ne.NodeErrors() {
		var re *RefusalError
		if errors.As(e, &re) {
			require.True(t, strings.HasPrefix(re.Err.Error(), "NOPERM"), "node %d: %v", e.Node, re.Err)
			refused[e.Node] = true
		}
	}
	require.Equal(t, map[int]bool{2: true, 3: true, 4: true}, refused)

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.Lock(lctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrConfigMismatch)
	require.NoError(t, lctx.Err(), "Lock waited for its ctx on a configuration error")
}

// A node that starts requiring a password refuses a new connection's
// acquire with "ERR Protocol error: unauthenticated multibulk length"
// (redis-server 7, for a request of more than 10 arguments), not NOAUTH.
// It was not typed as a refusal: three such nodes of five were "no
// quorum", and quorumlock run said the lock service was down (69) where
// its password is wrong (125).
func TestRefusal_AnUnauthenticatedAcquireIsARefusal(t *testing.T) {
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithNodeTimeout(500*time.Millisecond))
	ctx := context.Background()
	for _, i := range []int{2, 3, 4} {
		require.NoError(t, cl.raw[i].ConfigSet(ctx, "requirepass", "rotated").Err())
		// Connections open before keep their login: close them, as a
		// restart of the node would.
		require.NoError(t, cl.raw[i].ClientKillByFilter(ctx, "TYPE", "normal").Err())
		t.Cleanup(func() {
			admin := redis.NewClient(&redis.Options{Addr: cl.nodes[i].Addr(), Password: "rotated"})
			defer admin.Close()
			_ = admin.ConfigSet(ctx, "requirepass", "").Err()
		})
	}
	var err error
	for range 3 { // the first may meet a connection closed under it
		if _, err = c.TryLock(ctx, testenv.Key(t), time.Second); errors.Is(err, ErrConfigMismatch) {
			break
		}
	}
	require.ErrorIs(t, err, ErrConfigMismatch, "three nodes refusing the login: %v", err)
	require.ErrorIs(t, err, ErrNodeRefused)
	var ne *NotObtainedError
	require.ErrorAs(t, err, &ne)
	require.Equal(t, ReasonRefused, ne.Reason)
	require.False(t, IsUnavailable(err), "a password problem called an outage: %v", err)
}

// A refusal that arrives before the round is decided does not make
// contention a configuration error. Held elsewhere on a majority (nodes
// 0-2) with node 4 refusing and answering first: the round is decided at
// its third failed vote, by then node 4's refusal and two of the holder's
// nodes, with node 3 (free) not heard from. Counting node 3 as a possible
// grant called the refusal the reason, and Lock returned at once with an
// error matching ErrConfigMismatch (the CLI's run exits 125) while the key
// was merely held. The attempt now hears from the rest before it blames
// the refusal: counting node 4 as a grant still makes no majority.
func TestRefusal_AnEarlyRefusalDoesNotMakeContentionAConfigurationError(t *testing.T) {
	const ttl = 5 * time.Second // node timeout 250 ms: the delay below fits
	cl := newCluster(t, 5)
	c, f := cl.ready(t)
	ctx := context.Background()
	require.NoError(t, cl.raw[4].Do(ctx, "ACL", "SETUSER", "default", "-@scripting").Err())
	t.Cleanup(func() { _ = cl.raw[4].Do(ctx, "ACL", "SETUSER", "default", "+@all").Err() })

	key := testenv.Key(t)
	cl.set(t, key, "other", time.Minute, 0, 1, 2)
	f.delay(60*time.Millisecond, "acquire", 0, 1, 2, 3)
	_, err := c.TryLock(ctx, key, ttl)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NotErrorIs(t, err, ErrConfigMismatch, "contention reported as a configuration error")
	require.ErrorIs(t, err, ErrNodeRefused, "the refusing node's cause is typed")
	var e *NotObtainedError
	require.ErrorAs(t, err, &e)
	require.Equal(t, ReasonHeld, e.Reason, e.Detail)

	// Lock waits for the holder instead of giving up on a configuration
	// error.
	lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = c.Lock(lctx, key, ttl)
	require.ErrorIs(t, err, ErrNotObtained)
	require.NotErrorIs(t, err, ErrConfigMismatch)
	require.ErrorIs(t, lctx.Err(), context.DeadlineExceeded, "Lock returned before its ctx ended")
	f.heal()
}
