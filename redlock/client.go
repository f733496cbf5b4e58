package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/quorum"
)

// Client obtains leases on keys from N independent Redis primaries. It is
// safe for concurrent use. It does not own the redis clients given to New
// and never closes them; Close only stops the Client's own goroutines.
type Client struct {
	cfg    config
	nodes  []*node
	quorum int
	admit  *admission
	wake   *waker
	inst   *instruments
	gates  gates

	contended sync.Map // key -> time.Time of the last retried Lock

	mu     sync.Mutex
	closed bool
	bg     sync.WaitGroup // background work: straggler cleanup, admission
}

type node struct {
	idx  int
	name string // address as the caller configured it: the node's identity in membership records
	sc   redis.Scripter
	uc   redis.UniversalClient // nil for test doubles: no Pub/Sub, no INFO

	// missed is set when a call to the node ran out of time and cleared by
	// its next answer. An acquisition that can only succeed if a node that
	// missed its last deadline answers in time gives up without waiting.
	missed atomic.Bool
}

// observe records the outcome of one call to node i for missed.
func (c *Client) observe(i int, err error) {
	switch {
	case err == nil:
		c.nodes[i].missed.Store(false)
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		c.nodes[i].missed.Store(true)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// New returns a Client over nodes, which should be independent Redis
// primaries (no replication between them). It fails, contacting no node,
// when nodes is empty, an entry is nil, two entries are the same client or
// name the same address, or an option is invalid. It then asks every node
// for its run_id, bounded by WithProbeTimeout, and fails if two entries
// reach the same server; nodes that do not answer in time are not checked
// and do not make New fail (2 of 5 may be down).
func New(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, errors.New("redlock: New: no nodes")
	}
	ns := make([]*node, len(nodes))
	seen := map[redis.UniversalClient]int{}
	addrs := map[string]int{}
	for i, uc := range nodes {
		if uc == nil {
			return nil, fmt.Errorf("redlock: New: node %d is nil", i)
		}
		if j, ok := seen[uc]; ok {
			return nil, fmt.Errorf("redlock: New: nodes %d and %d are the same client", j, i)
		}
		seen[uc] = i
		name := addrOf(uc, i)
		if j, ok := addrs[name]; ok {
			return nil, fmt.Errorf("redlock: New: nodes %d and %d both reach %s", j, i, name)
		}
		addrs[name] = i
		ns[i] = &node{idx: i, name: name, sc: uc, uc: uc}
	}
	c, err := newClient(ns, opts)
	if err != nil {
		return nil, err
	}
	if err := c.checkDistinct(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// addrOf names a node by the address its client dials. Clients whose
// address we cannot read are named by their position.
func addrOf(uc redis.UniversalClient, i int) string {
	if rc, ok := uc.(*redis.Client); ok {
		if a := rc.Options().Addr; a != "" {
			return rc.Options().Network + "://" + normalizeAddr(a)
		}
	}
	return fmt.Sprintf("node-%d", i)
}

func normalizeAddr(a string) string {
	a = strings.TrimSpace(a)
	if rest, ok := strings.CutPrefix(a, "localhost:"); ok {
		return "127.0.0.1:" + rest
	}
	return a
}

func newClient(ns []*node, opts []Option) (*Client, error) {
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlock: New: nil option")
		}
		if err := o.apply(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.maxTTL <= drift.Drift(cfg.maxTTL, cfg.factor) {
		return nil, fmt.Errorf("redlock: New: max ttl %v leaves no validity with drift factor %v", cfg.maxTTL, cfg.factor)
	}
	inst, err := newInstruments(cfg.meters)
	if err != nil {
		return nil, fmt.Errorf("redlock: New: metrics: %w", err)
	}
	c := &Client{cfg: cfg, nodes: ns, quorum: quorum.Majority(len(ns)), inst: inst}
	c.admit = newAdmission(c)
	c.wake = newWaker(c)
	return c, nil
}

// checkDistinct compares the run_ids of the nodes that answer within the
// probe timeout.
func (c *Client) checkDistinct() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.probe)
	defer cancel()
	r := quorum.Start(ctx, len(c.nodes), func(ctx context.Context, i int) (string, error) {
		uc := c.nodes[i].uc
		if uc == nil {
			return "", errors.New("no info")
		}
		info, err := uc.Info(ctx, "server").Result()
		if err != nil {
			return "", err
		}
		return infoField(info, "run_id"), nil
	})
	replies := r.Await(ctx, len(c.nodes), func(quorum.Reply[string]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() }) // default go-redis clients ignore ctx: let stragglers finish on their own
	ids := map[string]int{}
	for _, rep := range replies {
		if rep.Err != nil || rep.Val == "" {
			if rep.Err != nil {
				c.cfg.logger.Warn("redlock: node did not answer the startup probe", "node", rep.Node, "addr", c.nodes[rep.Node].name, "err", rep.Err)
			}
			continue
		}
		if j, ok := ids[rep.Val]; ok {
			a, b := min(j, rep.Node), max(j, rep.Node)
			return fmt.Errorf("redlock: New: nodes %d (%s) and %d (%s) are the same Redis server (run_id %s)",
				a, c.nodes[a].name, b, c.nodes[b].name, rep.Val)
		}
		ids[rep.Val] = rep.Node
	}
	return nil
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// Close stops the Client's background work (Pub/Sub listeners, cleanup of
// slow nodes, admission of restarted nodes) and waits for it, which may
// take up to the cleanup timeout, or a node client's ReadTimeout for calls
// stuck on an unresponsive node. Leases already handed out stay valid until
// their deadline but can no longer be extended or released. Close does not
// close the redis clients. It is safe to call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.admit.stop()
	c.wake.close()
	c.bg.Wait()
	return nil
}

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

// check validates a call's arguments before any node is contacted.
func (c *Client) check(key string, ttl time.Duration) error {
	if c.isClosed() {
		return ErrClosed
	}
	if key == "" {
		return errors.New("redlock: empty key")
	}
	if d := drift.Drift(ttl, c.cfg.factor); ttl <= d {
		return fmt.Errorf("redlock: ttl %v must exceed its drift %v (ttl*%v + %v)", ttl, d, c.cfg.factor, drift.Resolution)
	}
	if ttl > c.cfg.maxTTL {
		return fmt.Errorf("redlock: ttl %v exceeds the client's max ttl %v (WithMaxTTL)", ttl, c.cfg.maxTTL)
	}
	if ttl%time.Millisecond != 0 {
		return fmt.Errorf("redlock: ttl %v is not a whole number of milliseconds (Redis PX resolution)", ttl)
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

func (c *Client) nodeErr(i int, err error) *NodeError {
	if !errors.Is(err, ErrNodeHeld) && !errors.Is(err, ErrNodeQuarantined) {
		c.inst.nodeError(c.nodes[i].name)
	}
	return &NodeError{Node: i, Addr: c.nodes[i].name, Err: err}
}
