package redlock

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Client obtains leases on keys from N independent Redis primaries. It is
// safe for concurrent use. It does not own the redis clients given to New
// and never closes them; Close only stops the Client's own goroutines.
type Client struct {
	cfg    config
	nodes  []*node
	owned  []*redis.Client // the node clients Open built, which Close closes
	quorum int
	dep    deployment // the deployment settings this client runs with
	// handoffs: this Client's Lock calls take keys handed over inside a
	// release (see waiterID, handedLease).
	handoffs bool
	// line is how long a Lock call stays in a key's line on a node
	// without trying again: past it the node forgets the call, so a caller
	// that gave up or died stops being woken first.
	line  time.Duration
	admit *admission
	ident *identity
	wake  *waker
	renew *renewer
	inst  *instruments
	gates gates
	// notices keeps the quarantine notice to one per episode.
	notices notices
	// unavailableSaid: the unavailability notice of the current episode
	// went out (see noticeUnavailable).
	unavailableSaid atomic.Bool

	tracer trace.Tracer
	held   atomic.Int64 // live leases, for the quorumlock.leases.held gauge

	roundNs atomic.Int64 // a moving average of acquire rounds, for handoffWindow

	// boxes keeps the script arguments most calls share boxed.
	boxes script.Boxes

	mu      sync.Mutex
	closed  bool
	closing chan struct{}  // closed by Close: ends Lock's waits
	bg      sync.WaitGroup // background work: straggler cleanup, admission

	// pool runs the hot rounds' per-node calls (acquire, fence commit,
	// cleanup, extend, release) on goroutines kept between rounds: a new
	// goroutine grows its stack in every go-redis call. Measured in bench's
	// uncontended scenario (alternated quick runs): 231-266 µs of client
	// CPU per Lock+Release without the pool, 201-206 with it.
	pool *quorum.Pool
	// rounds holds a slot per acquisition attempt in flight (see
	// maxRounds).
	rounds chan struct{}
}

// sawRound folds an acquire round's duration into the moving average.
func (c *Client) sawRound(d time.Duration) {
	old := c.roundNs.Load()
	if old == 0 {
		old = int64(d)
	}
	c.roundNs.Store((7*old + int64(d)) / 8)
}

// handoffWindow is how long a release reserves the key for the waiters it
// names: about ten acquire rounds, at least 20 ms, at most half the ttl.
// Long enough for a woken waiter to take the key, short enough that a
// waiter that is gone holds nobody up for long.
func (c *Client) handoffWindow(ttl time.Duration) time.Duration {
	w := max(10*time.Duration(c.roundNs.Load()), 20*time.Millisecond)
	return max(min(w, ttl/2), time.Millisecond)
}

// New returns a Client over nodes, which must be independent Redis
// primaries (no replication between them, no cluster): at least 5.0, run
// with maxmemory-policy noeviction. It fails, contacting no node, when
// nodes is empty, an entry is nil (a typed nil too), a cluster, ring or
// Sentinel-failover client, two entries are the same client or name the
// same address, or an option is invalid. It then asks every node for its
// INFO, bounded by WithProbeTimeout, and fails if two entries reach the
// same server, a node is a replica or in cluster mode, or runs a Redis
// older than 5.0, or refuses the client (ErrNodeRefused: a wrong password
// or ACL user, an ACL without the scripts, a database the node lacks; see
// WithoutRefusalCheck). It waits for every node up to the probe timeout,
// but only 50 ms more once a majority answered; nodes that do not answer
// in time are not checked, count as having missed their deadline until
// they answer, and do not make New fail (2 of 5 may be down; with fewer
// than a majority answering, New logs a warning and succeeds, since a
// service may start before its nodes). Two entries that reach one server
// are refused here when both answer (*DuplicateNodeError); an entry that
// did not answer is checked against the others when it first answers, and
// its vote counts only after that (docs/protocol.md, "One server, one
// vote").
//
// An even number of nodes is logged as a warning (WithLogger): 4 nodes
// tolerate one failed node, as 3 do. So is a node that evicts keys or has
// replicas (from the INFO); RDB snapshots and the AOF fsync policy need
// CONFIG GET, which Client.Check sends.
//
// Every client of a deployment must be built with the same nodes (in any
// order, under any names), WithMaxTTL and WithDriftFactor: the nodes keep
// those settings and refuse a client whose settings differ
// (ErrConfigMismatch). A new deployment is usable one quarantine after its
// first use, or at once after Bootstrap.
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, errors.New("redlock: New: no nodes")
	}
	ns := make([]*node, len(nodes))
	seen := map[redis.UniversalClient]int{}
	for i, uc := range nodes {
		if err := checkNodeClient(uc); err != nil {
			return nil, fmt.Errorf("redlock: New: node %d: %w", i, err)
		}
		if j, ok := seen[uc]; ok {
			return nil, fmt.Errorf("redlock: New: nodes %d and %d are the same client", j, i)
		}
		seen[uc] = i
		ns[i] = &node{idx: i, conn: redisconn.New(uc), net: transportOf(uc)}
	}
	return build("New", ns, opts)
}

// build is the part of New and NewFromConns (ctor, which its errors name)
// that does not depend on the driver: it refuses two nodes with one
// address, builds the Client and probes the nodes.
func build(ctor string, ns []*node, opts []Option) (*Client, error) {
	addrs := map[string]int{}
	for i, nd := range ns {
		name, key := addrOf(nd.conn, i), sameAddr(nd.conn, i)
		if j, ok := addrs[key]; ok {
			return nil, fmt.Errorf("redlock: %s: nodes %d (%s) and %d (%s) are the same address: list each server once", ctor, j, ns[j].name, i, name)
		}
		addrs[key] = i
		nd.name = name
	}
	c, err := newClient(ctor, ns, opts)
	if err != nil {
		return nil, err
	}
	if n := len(ns); n%2 == 0 {
		c.cfg.logger.Warn("redlock: an even number of nodes tolerates no more failed nodes than one node fewer: use an odd number",
			"nodes", n, "tolerates", n-c.quorum)
	}
	// The probe also verifies the entries that answer it; the others are
	// verified when they first answer a script call, before their votes
	// count (identity.go).
	if err := c.probe(ctor); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func newClient(ctor string, ns []*node, opts []Option) (*Client, error) {
	cfg := defaults()
	if err := applyOptions(&cfg, opts); err != nil {
		return nil, fmt.Errorf("redlock: %s: %w", ctor, err)
	}
	for _, nd := range ns {
		nd.sn = script.NewNode(nd.conn, cfg.cleanup)
	}
	c := &Client{cfg: cfg, nodes: ns, quorum: quorum.Majority(len(ns)),
		dep:    newDeployment(settings{nodes: len(ns), maxTTL: cfg.maxTTL, factor: cfg.factor}, cfg.quarantine),
		tracer: newTracer(cfg.tracers), closing: make(chan struct{}), rounds: make(chan struct{}, maxRounds), pool: quorum.NewPool(poolIdle, poolPerNode*len(ns))}
	c.line = max(2*cfg.maxTTL, 10*time.Second)
	c.admit = newAdmission(c)
	inst, err := newInstruments(cfg.meters, cfg.keyAttr, &c.held, c.admit.quarantined)
	if err != nil {
		return nil, fmt.Errorf("redlock: %s: metrics: %w", ctor, err)
	}
	c.inst = inst
	c.ident = newIdentity(len(ns))
	c.wake = newWaker(c)
	// A release hands the key itself to a Lock call only when the call
	// can hear of it: notices on, every node subscribable. Fenced calls
	// get the reservation instead (a handed key has no fencing commit),
	// as do calls of a Client without WithKeyHandOff.
	c.handoffs = !cfg.fencing && cfg.wake && cfg.handOff
	c.renew = newRenewer(c)
	return c, nil
}

// Close stops the Client's background work (Pub/Sub listeners, cleanup of
// slow nodes, admission of restarted nodes) and waits for it, which may
// take up to the cleanup timeout, or a node client's ReadTimeout for calls
// stuck on an unresponsive node. Lock calls still waiting return ErrClosed,
// and no lease is handed out once Close has begun. Leases handed out before
// stay valid until their deadline and can still be released (Release then
// waits for every node, up to the cleanup timeout) or extended. Close does
// not close the redis clients given to New. It closes those Open built:
// release a Client from Open's leases before Close, since a Release after
// it reaches no node (ErrReleaseUnconfirmed; the keys free at their ttl).
// It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	c.mu.Unlock()
	c.admit.stop()
	c.wake.close()
	c.bg.Wait()
	c.pool.Close()
	c.inst.close()
	for _, rc := range c.owned {
		_ = rc.Close()
	}
	return nil
}

// poolIdle is how long a pooled goroutine may stay idle before the pool's
// next use retires it, and poolPerNode how many may wait per node: 64
// Lock+Release loops at once (bench's many-keys) have about two calls
// each in flight per node, and the thousands of calls a frozen node holds
// until their deadlines should not all stay (not tuned by measurement).
const (
	poolIdle    = 5 * time.Second
	poolPerNode = 128
)

// spawn runs f as background work owned by the Client; Close waits for it.
// After Close, f runs synchronously so that nothing escapes the wait.
func (c *Client) spawn(f func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		f()
		return
	}
	c.bg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.bg.Done()
		f()
	}()
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// check validates a Lock or TryLock call before any node is contacted.
func (c *Client) check(key string, ttl time.Duration) error {
	if c.isClosed() {
		return ErrClosed
	}
	if e := c.ident.dup.Load(); e != nil {
		return e
	}
	if err := checkKey(key); err != nil {
		return err
	}
	return c.checkTTL(ttl)
}

// CheckTTL reports whether Lock, TryLock, Do and Extend of this client
// accept ttl: a whole number of milliseconds, above its drift and at most
// the client's max ttl. It contacts no node; tools use it to refuse a bad
// ttl before they start anything. A refusal is an *InputError
// (ErrInvalidTTL).
func (c *Client) CheckTTL(ttl time.Duration) error { return c.checkTTL(ttl) }

// minTTL is the smallest ttl this client accepts: the first whole
// millisecond above its drift.
func (c *Client) minTTL() time.Duration {
	m := drift.MinTTL(c.cfg.factor)
	return (m + time.Millisecond - 1).Truncate(time.Millisecond)
}

func (c *Client) checkTTL(ttl time.Duration) error {
	bad := func(format string, args ...any) error {
		return &InputError{Arg: "ttl", TTL: ttl, Reason: fmt.Sprintf(format, args...)}
	}
	switch d := drift.Drift(ttl, c.cfg.factor); {
	case ttl <= 0:
		return bad("ttl %v must be positive: the smallest this client accepts is %v (a ttl must exceed its drift, ttl*%v + %v)",
			ttl, c.minTTL(), c.cfg.factor, drift.Resolution)
	case ttl%time.Millisecond != 0:
		return bad("ttl %v is not a whole number of milliseconds (Redis PX resolution)", ttl)
	case ttl <= d:
		return bad("ttl %v must exceed its drift %v (ttl*%v + %v): the smallest this client accepts is %v",
			ttl, d, c.cfg.factor, drift.Resolution, c.minTTL())
	case ttl > c.cfg.maxTTL:
		return bad("ttl %v exceeds the client's max ttl %v (WithMaxTTL)", ttl, c.cfg.maxTTL)
	}
	return nil
}

// nodeTimeout is the bound on one node's part of a round for a ttl.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	if c.cfg.nodeTimeout > 0 {
		return c.cfg.nodeTimeout
	}
	return max(time.Duration(float64(ttl)*c.cfg.timeoutFactor), c.cfg.minTimeout)
}

// newValue returns a fresh random lock value: 20 bytes from crypto/rand.
func newValue() string {
	var b [20]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// callArgs returns the attempts' part of cc.
func (c *Client) callArgs(cc *callConfig) callArgs {
	return callArgs{meta: cc.meta, fenced: cc.fenced || c.cfg.fencing}
}

// callConfig returns the settings of a call with opts, or the error of an
// invalid option. It touches no node.
func (c *Client) callConfig(opts []CallOption) (callConfig, error) {
	cc := callConfig{retry: c.cfg.retry, maxAttempts: c.cfg.maxAttempts}
	if len(opts) == 0 {
		return cc, nil
	}
	return applyCall(cc, opts)
}
