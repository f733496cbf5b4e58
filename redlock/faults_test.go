package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The one fault harness of the package's tests. A cluster is N real
// redis-server nodes; every Client built over it comes from New, so it
// runs the production call path (batcher, EVALSHA, Pub/Sub waker,
// hand-offs), and reaches each node through a go-redis client of its own
// that carries a faults hook. The hook fails, delays, holds or counts
// script calls per script and per node, and runs a test's own steps for
// interleavings that need a call to stall at a precise point. Freezing is
// SIGSTOP (testenv's Pause), a wipe is FLUSHALL or a restart without
// persistence. Raw clients, without a hook, read and write the nodes as
// another party would.

// cluster is the nodes of one test and a raw client per node.
type cluster struct {
	nodes []*testenv.RedisNode
	raw   []*redis.Client
}

// newCluster starts n nodes for t.
func newCluster(t *testing.T, n int, opts ...testenv.RedisOption) *cluster {
	t.Helper()
	return clusterOf(t, testenv.RedisNodes(t, n, opts...))
}

// clusterOf is a cluster over nodes t already started.
func clusterOf(t *testing.T, nodes []*testenv.RedisNode) *cluster {
	t.Helper()
	cl := &cluster{nodes: nodes}
	for _, nd := range nodes {
		cl.raw = append(cl.raw, nd.Client(t))
	}
	return cl
}

// client builds a Client over cl with New, closed when t ends.
func (cl *cluster) client(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, _ := cl.build(t, nil, opts...)
	return c
}

// faulty is client, with the faults hook its node clients carry.
func (cl *cluster) faulty(t *testing.T, opts ...Option) (*Client, *faults) {
	t.Helper()
	return cl.build(t, nil, opts...)
}

// ready is faulty on a bootstrapped deployment, with the counts of the
// calls Bootstrap made cleared: a deployment in use, as most tests want.
func (cl *cluster) ready(t *testing.T, opts ...Option) (*Client, *faults) {
	t.Helper()
	c, f := cl.faulty(t, opts...)
	require.NoError(t, c.Bootstrap(context.Background()))
	f.reset()
	return c, f
}

// build is faulty with the node clients' options adjusted by conf (nil:
// go-redis defaults, as a user's).
func (cl *cluster) build(t *testing.T, conf func(*redis.Options), opts ...Option) (*Client, *faults) {
	t.Helper()
	f := &faults{n: len(cl.nodes), calls: map[scriptAt]int64{}}
	ucs := make([]redis.UniversalClient, len(cl.nodes))
	for i, nd := range cl.nodes {
		o := &redis.Options{Addr: nd.Addr()}
		if conf != nil {
			conf(o)
		}
		rc := redis.NewClient(o)
		rc.AddHook(nodeHook{f: f, node: i})
		t.Cleanup(func() { _ = rc.Close() })
		ucs[i] = rc
	}
	c, err := New(ucs, withTestNodeTimeout(opts)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	// Runs before Close, which waits for calls a hold keeps.
	t.Cleanup(f.releaseAll)
	settleProofs(t, c)
	return c, f
}

// testNodeTimeout is the node timeout of the harness's clients unless a
// test sets its own. The default, 5% of the ttl (5 ms at the 100 ms max
// ttls many tests use, 50 ms at 1 s), is what a user gets; under -race on
// a loaded 2-core machine (make stress, CI) it was missed on whole rounds,
// and tests that are not about timeouts failed for want of a majority.
const testNodeTimeout = 300 * time.Millisecond

// withTestNodeTimeout puts testNodeTimeout before opts, so that a test's
// own WithNodeTimeout wins.
func withTestNodeTimeout(opts []Option) []Option {
	return append([]Option{WithNodeTimeout(testNodeTimeout)}, opts...)
}

// settleProofs gives the identity proofs of the nodes that answer time
// to land: New returns at a majority of answers, and on a loaded machine
// a node proven a moment later is not counted by the first attempts, which
// then fail for want of a majority where a test cuts another node off. A
// node that is down (frozen, cut off by the test) stays unproven: after
// a second the test goes on without it.
func settleProofs(t *testing.T, c *Client) {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { return c.ident.allVerified() || time.Since(start) >= time.Second },
		5*time.Second, time.Millisecond)
}

// universal returns the raw clients typed for New.
func (cl *cluster) universal() []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(cl.raw))
	for i, c := range cl.raw {
		out[i] = c
	}
	return out
}

// all returns the indexes of every node.
func (cl *cluster) all() []int {
	out := make([]int, len(cl.nodes))
	for i := range out {
		out[i] = i
	}
	return out
}

// freeze SIGSTOPs the given nodes until thaw or the end of the test.
func (cl *cluster) freeze(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.nodes[i].Pause())
		t.Cleanup(func() { _ = cl.nodes[i].Resume() }) // a second SIGCONT is harmless
	}
}

func (cl *cluster) thaw(t *testing.T, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.nodes[i].Resume())
	}
}

// wipe empties node i's data (FLUSHALL), as a restart without persistence
// does, keeping its process and script cache.
func (cl *cluster) wipe(t *testing.T, i int) {
	t.Helper()
	require.NoError(t, cl.raw[i].FlushAll(context.Background()).Err())
}

// restartEmpty kills node i with SIGKILL and starts it again without data.
func (cl *cluster) restartEmpty(t *testing.T, i int) {
	t.Helper()
	require.NoError(t, cl.nodes[i].Kill())
	require.NoError(t, cl.nodes[i].Restart(context.Background()))
}

// value reads key on node i ("" when absent).
func (cl *cluster) value(t *testing.T, i int, key string) string {
	t.Helper()
	v, err := cl.raw[i].Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// values reads key on the given nodes.
func (cl *cluster) values(t *testing.T, idx []int, key string) []string {
	t.Helper()
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = cl.value(t, i, key)
	}
	return out
}

// set writes key on the given nodes as another client would (ttl 0: no
// expiry).
func (cl *cluster) set(t *testing.T, key, val string, ttl time.Duration, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.raw[i].Set(context.Background(), key, val, ttl).Err())
	}
}

// hold makes another owner hold key on the given nodes for ttl.
func (cl *cluster) hold(t *testing.T, key string, ttl time.Duration, idx ...int) {
	t.Helper()
	cl.set(t, key, "another-owner", ttl, idx...)
}

// takeOver makes another owner hold key on the given nodes for ttl in
// place of the value the key holds there, in one command per node: the key
// is never free in between, so no Lock call in flight can get it there
// (a DEL then a SET left a window in which a waiter's acquire landed, and
// the SET then overwrote the key the waiter had been granted). It fails t
// where the key was not held.
func (cl *cluster) takeOver(t *testing.T, key string, ttl time.Duration, idx ...int) {
	t.Helper()
	for _, i := range idx {
		ok, err := cl.raw[i].SetXX(context.Background(), key, "another-owner", ttl).Result()
		require.NoError(t, err)
		require.True(t, ok, "node %d did not hold %s", i, key)
	}
}

// drop deletes key on the given nodes.
func (cl *cluster) drop(t *testing.T, key string, idx ...int) {
	t.Helper()
	for _, i := range idx {
		require.NoError(t, cl.raw[i].Del(context.Background(), key).Err())
	}
}

// pttl is key's time to live on node i (negative: no key, or no expiry).
func (cl *cluster) pttl(t *testing.T, i int, key string) time.Duration {
	t.Helper()
	d, err := cl.raw[i].PTTL(context.Background(), key).Result()
	require.NoError(t, err)
	return d
}

// requireGone waits for key to be gone from every node: a Release or a
// failed attempt returns at a majority and the rest lands just after.
func (cl *cluster) requireGone(t *testing.T, key, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for i := range cl.raw {
			if cl.value(t, i, key) != "" {
				return false
			}
		}
		return true
	}, 2*time.Second, time.Millisecond, "%s: a node still holds %q", what, key)
}

// replay runs call on its node again through the raw client, as the
// request a test held back reaching the node late.
func (cl *cluster) replay(ctx context.Context, c *call) *redis.Cmd {
	return scriptNamed(c.Script).Run(ctx, cl.raw[c.Node], c.Keys, c.Args...)
}

// call is one script call a Client sends to a node.
type call struct {
	Node   int
	Script string // the script's name: acquire, release, extend, ... ("?" for an unknown one)
	Keys   []string
	Args   []any

	reply *redis.Cmd // set by answer
}

// errAnswered marks a call a before step answered itself.
var errAnswered = errors.New("answered by the test")

// answer makes a before step's call return r, which the step got some
// other way (cluster.replay, say), instead of going to the node.
func (c *call) answer(r *redis.Cmd) error {
	c.reply = r
	return errAnswered
}

// settle puts what stage decided into cmd.
func settle(cmd redis.Cmder, c *call, err error) {
	if errors.Is(err, errAnswered) {
		if rc, ok := cmd.(*redis.Cmd); ok {
			rc.SetVal(c.reply.Val())
		}
		cmd.SetErr(c.reply.Err())
		return
	}
	cmd.SetErr(err)
}

// faults is the hook of one Client's node clients: the rules and steps
// its script calls go through, and their counts. Calls other than scripts
// (the startup probe's INFO, Pub/Sub) pass untouched.
type faults struct {
	n int

	mu      sync.Mutex
	rules   []rule
	befores []func(ctx context.Context, c *call) error
	afters  []func(c *call, err error)
	calls   map[scriptAt]int64 // calls made, an EVALSHA answered NOSCRIPT and sent again as EVAL counted once
	holds   []chan struct{}
	closed  bool // releaseAll ran: holds let everything through

	started, ended atomic.Int64
	held           atomic.Int64 // calls waiting on a hold now
}

type scriptAt struct {
	script string
	node   int
}

// rule is one fault on some scripts of some nodes.
type rule struct {
	script string // "" for every script
	nodes  []int  // empty for every node
	err    error
	delay  time.Duration
	hold   chan struct{}
}

func (r rule) matches(c *call) bool {
	if r.script != "" && r.script != c.Script {
		return false
	}
	if len(r.nodes) == 0 {
		return true
	}
	return slices.Contains(r.nodes, c.Node)
}

// fail makes calls of script ("" every script) on nodes (none: every
// node) fail with err without reaching the node.
func (f *faults) fail(err error, script string, nodes ...int) {
	f.add(rule{script: script, nodes: nodes, err: err})
}

// delay sends calls of script on nodes d late; a caller that gives up
// meanwhile gets its ctx's error and the call is never sent.
func (f *faults) delay(d time.Duration, script string, nodes ...int) {
	f.add(rule{script: script, nodes: nodes, delay: d})
}

// hold keeps calls of script on nodes until the returned release is
// called (or the test ends): a stalled node that honours its caller's
// ctx, whose call then fails unsent.
func (f *faults) hold(script string, nodes ...int) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.holds = append(f.holds, ch)
	f.mu.Unlock()
	f.add(rule{script: script, nodes: nodes, hold: ch})
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// heal removes every rule that names one of nodes (none: every rule).
// Steps (before, after) stay.
func (f *faults) heal(nodes ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(nodes) == 0 {
		f.rules = nil
		return
	}
	keep := f.rules[:0]
	for _, r := range f.rules {
		if !slices.ContainsFunc(r.nodes, func(i int) bool { return slices.Contains(nodes, i) }) {
			keep = append(keep, r)
		}
	}
	f.rules = keep
}

// before runs step ahead of every script call, after the rules: a
// non-nil error answers the call instead of the node (it is not sent).
func (f *faults) before(step func(ctx context.Context, c *call) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.befores = append(f.befores, step)
}

// after runs step once the node answered a script call (err is the
// call's error, nil on success).
func (f *faults) after(step func(c *call, err error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.afters = append(f.afters, step)
}

func (f *faults) add(r rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
}

// count is how many calls of script ("" every script) node i was sent
// (i < 0: every node).
func (f *faults) count(script string, i int) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for at, k := range f.calls {
		if (script == "" || at.script == script) && (i < 0 || at.node == i) {
			n += k
		}
	}
	return n
}

// total is every script call made to every node.
func (f *faults) total() int64 { return f.count("", -1) }

// breakdown lists the counts by script and node, for a failure message.
func (f *faults) breakdown() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var parts []string
	for at, k := range f.calls {
		parts = append(parts, fmt.Sprintf("%s@%d=%d", at.script, at.node, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// reset clears the counts.
func (f *faults) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = map[scriptAt]int64{}
}

// idle reports whether every script call that was sent has returned.
func (f *faults) idle() bool { return f.started.Load() == f.ended.Load() }

// requireIdle waits until every script call the Client sent returned:
// its rounds' stragglers and cleanups are over. A call whose goroutine
// has not reached the hook yet is not counted as sent: after a call that
// returns at a majority, use requireAttempts, which waits for one on
// every node.
func (f *faults) requireIdle(t *testing.T) {
	t.Helper()
	require.Eventually(t, f.idle, 5*time.Second, time.Millisecond, "script calls still in flight")
}

// requireAttempts waits until the Client has sent at least n acquire
// calls to each of the given nodes (none: every node) and every call it
// sent has returned: a waiting Lock call's attempts so far are over. A
// Lock call of a Client new to the key makes two before it sleeps: its
// first, after which it subscribes, and one more at once, since a release
// before the subscription was live would have gone unnoticed.
func (f *faults) requireAttempts(t *testing.T, n int64, idx ...int) {
	t.Helper()
	if len(idx) == 0 {
		idx = make([]int, f.n)
		for i := range idx {
			idx[i] = i
		}
	}
	require.Eventually(t, func() bool {
		for _, i := range idx {
			if f.count("acquire", i) < n {
				return false
			}
		}
		return f.idle()
	}, 5*time.Second, time.Millisecond, "the Lock call's %d attempts were not over", n)
}

// requireOnlyHeld waits until every script call in flight is one a hold
// keeps: the calls that were already past the hold when it was set have
// returned.
func (f *faults) requireOnlyHeld(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return f.started.Load()-f.ended.Load() == f.held.Load() },
		5*time.Second, time.Millisecond, "script calls other than held ones still in flight")
}

// releaseAll lets every held call go, now and from now on.
func (f *faults) releaseAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, ch := range f.holds {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
	f.holds = nil
}

// stage runs the rules and steps ahead of c: the error answers c, unsent.
func (f *faults) stage(ctx context.Context, c *call) error {
	f.mu.Lock()
	var rules []rule
	for _, r := range f.rules {
		if r.matches(c) {
			rules = append(rules, r)
		}
	}
	befores := slices.Clone(f.befores)
	closed := f.closed
	f.mu.Unlock()
	for _, r := range rules {
		switch {
		case r.err != nil:
			return r.err
		case r.delay > 0:
			select {
			case <-time.After(r.delay):
			case <-ctx.Done():
				return ctx.Err()
			}
		case r.hold != nil && !closed:
			f.held.Add(1)
			select {
			case <-r.hold:
				f.held.Add(-1)
			case <-ctx.Done():
				f.held.Add(-1)
				return ctx.Err()
			}
		}
	}
	for _, b := range befores {
		if err := b(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// done records c's answer and runs the after steps.
func (f *faults) done(c *call, err error) {
	f.mu.Lock()
	if err == nil || !isNoScript(err) {
		f.calls[scriptAt{c.Script, c.Node}]++
	}
	afters := slices.Clone(f.afters)
	f.mu.Unlock()
	for _, a := range afters {
		a(c, err)
	}
}

// nodeHook is faults on the client of one node.
type nodeHook struct {
	f    *faults
	node int
}

func (h nodeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h nodeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c := parseCall(h.node, cmd)
		if c == nil {
			return next(ctx, cmd)
		}
		h.f.started.Add(1)
		defer h.f.ended.Add(1)
		// The error next returns is the call's: go-redis sets it on cmd
		// only once every hook has returned.
		err := h.f.stage(ctx, c)
		if err != nil {
			settle(cmd, c, err)
			err = cmd.Err()
		} else {
			err = next(ctx, cmd)
		}
		h.f.done(c, err)
		return err
	}
}

// ProcessPipelineHook stages the script calls of a pipeline (the
// batcher's, Inspect's) one by one, at once, and sends the pipeline with
// the calls no fault answered.
func (h nodeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		calls := make([]*call, len(cmds))
		errs := make([]error, len(cmds))
		var wg sync.WaitGroup
		for k, cmd := range cmds {
			if calls[k] = parseCall(h.node, cmd); calls[k] != nil {
				h.f.started.Add(1)
				wg.Go(func() { errs[k] = h.f.stage(ctx, calls[k]) })
			}
		}
		wg.Wait()
		send := make([]redis.Cmder, 0, len(cmds))
		for k, cmd := range cmds {
			if errs[k] != nil {
				settle(cmd, calls[k], errs[k])
				continue
			}
			send = append(send, cmd)
		}
		var err error
		if len(send) > 0 {
			err = next(ctx, send)
		}
		for k, c := range calls {
			if c != nil {
				h.f.done(c, cmds[k].Err())
				h.f.ended.Add(1)
			}
		}
		return err
	}
}

// parseCall reads the script call cmd carries, nil for other commands.
func parseCall(node int, cmd redis.Cmder) *call {
	a := cmd.Args()
	if len(a) < 3 {
		return nil
	}
	var sha string
	switch name, _ := a[0].(string); strings.ToLower(name) {
	case "evalsha", "evalsha_ro":
		sha = fmt.Sprint(a[1])
	case "eval", "eval_ro":
		sha = redis.NewScript(fmt.Sprint(a[1])).Hash()
	default:
		return nil
	}
	n, err := strconv.Atoi(fmt.Sprint(a[2]))
	if err != nil || len(a) < 3+n {
		return nil
	}
	keys := make([]string, n)
	for k := range keys {
		keys[k] = fmt.Sprint(a[3+k])
	}
	return &call{Node: node, Script: scriptName(sha), Keys: keys, Args: a[3+n:]}
}

// requireHeld waits until every node holds key.
func (cl *cluster) requireHeld(t *testing.T, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for i := range cl.raw {
			if cl.value(t, i, key) == "" {
				return false
			}
		}
		return true
	}, 2*time.Second, time.Millisecond, "the lease's key never reached every node")
}

// admittedOn reports whether node i carries an admission marker.
func (cl *cluster) admittedOn(t *testing.T, i int) bool {
	t.Helper()
	return cl.value(t, i, keyMarker) != ""
}

// isTestKey reports whether k is a key of testenv.Key, not a warm-up's.
func isTestKey(k string) bool { return strings.HasPrefix(k, "qltest:") }

// requireGoneOn waits for key to be gone from the given nodes.
func (cl *cluster) requireGoneOn(t *testing.T, key string, idx ...int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, i := range idx {
			if cl.value(t, i, key) != "" {
				return false
			}
		}
		return true
	}, 2*time.Second, time.Millisecond, "nodes %v still hold %q", idx, key)
}

// roomy is the node timeout of the clients whose Release a test asserts
// with a max ttl of a few hundred ms: the default, 5% of the ttl (15 ms at
// 300 ms), is missed under load on a shared 2-core machine, and a release
// that a majority does not confirm in time is an error.
var roomy = WithNodeTimeout(50 * time.Millisecond)

// slowRetry puts a waiter's own next try 5 s away, so that within a test
// only a release's notice can wake it.
var slowRetry = WithRetry(func(int) time.Duration { return 5 * time.Second }, 0)

// requireLineLen waits until key's line holds n Lock calls on each of the
// given nodes (none: every node); if it never does, it logs what each
// node holds before failing.
func (cl *cluster) requireLineLen(t *testing.T, key string, n int64, what string, idx ...int) {
	t.Helper()
	if len(idx) == 0 {
		idx = cl.all()
	}
	ctx := context.Background()
	if assert.Eventually(t, func() bool {
		for _, i := range idx {
			if got, err := cl.raw[i].ZCard(ctx, keyLine(key)).Result(); err != nil || got != n {
				return false
			}
		}
		return true
	}, 3*time.Second, time.Millisecond, what) {
		return
	}
	for _, i := range idx {
		q, err := cl.raw[i].ZRangeWithScores(ctx, keyLine(key), 0, -1).Result()
		t.Logf("node %d holds %q, line %v (%v)", i, cl.value(t, i, key), q, err)
	}
	t.FailNow()
}

// requireQuarantineOver waits until each of the given nodes carries a
// pending mark whose quarantine is over on the node's own clock, as the
// admission check reads it (script.State): the next admission check
// there may admit it. A node admitted meanwhile (its marker set, the mark
// gone) counts as over too; the test's own checks judge that.
func (cl *cluster) requireQuarantineOver(t *testing.T, idx ...int) {
	t.Helper()
	over := func(i int) bool {
		st, err := script.NewNode(redisconn.New(cl.raw[i]), time.Second).State(context.Background())
		return err == nil && (st.Marker != "" || st.Pending != "" && st.Quarantine.Left() <= 0)
	}
	require.Eventually(t, func() bool {
		for _, i := range idx {
			if !over(i) {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the quarantine of nodes %v never ended", idx)
}

// line returns key's line on node i, first in line first.
func (cl *cluster) line(t *testing.T, i int, key string) []string {
	t.Helper()
	ids, err := cl.raw[i].ZRange(context.Background(), keyLine(key), 0, -1).Result()
	require.NoError(t, err)
	return ids
}

// heldKey admits a's nodes at once and has a take a fresh key for 5 s.
func heldKey(t *testing.T, a *Client) (string, *Lease) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, a.Bootstrap(ctx))
	key := testenv.Key(t)
	l, err := a.TryLock(ctx, key, 5*time.Second)
	require.NoError(t, err)
	// TryLock returns at a majority: wait for the rest, so that no waiter
	// a test starts next can win a node the key has not reached yet.
	settled(t, a, 2*time.Second)
	return key, l
}

// lockIn starts c.Lock(key, ttl, opts...) in a goroutine and returns the
// channel its lease comes on (nil after an error, which fails the test).
func lockIn(t *testing.T, c *Client, key string, ttl time.Duration, opts ...CallOption) <-chan *Lease {
	ch := make(chan *Lease, 1)
	go func() {
		l, err := c.Lock(context.Background(), key, ttl, opts...)
		if err != nil {
			t.Error(err)
		}
		ch <- l
	}()
	return ch
}

// releaseTo releases la and returns the lease the first in line's Lock
// call sends on lb, within 3 s.
func releaseTo(t *testing.T, la *Lease, lb <-chan *Lease) *Lease {
	t.Helper()
	require.NoError(t, la.Release(context.Background()))
	select {
	case l := <-lb:
		require.NotNil(t, l, "the first in line's Lock failed")
		return l
	case <-time.After(3 * time.Second):
		t.Fatal("the first in line did not get the key")
		return nil
	}
}
