package redlock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
)

// Restart quarantine (docs/design.md, "Restarts, settings and bootstrap";
// the proof is in docs/protocol.md).
//
// A node votes only while it carries an admission marker holding the
// deployment's settings; the acquire script refuses to take a lock on a
// node without one, or with other settings than the client's. A node that
// restarts without persistence (or is flushed) loses the marker together
// with the locks it had granted, so it stops voting by itself, at once,
// without any client having to notice the restart.
//
// Re-admitting it must wait until every lock it may have forgotten has
// expired: one quarantine (the deployment's max ttl plus drift) after it
// lost its state. The client cannot learn when that was, so the wait
// starts when a client first finds the node without its marker, which is
// later and therefore safe: it writes a pending mark stamped with the
// node's clock, and the node is admitted once the stamp is one quarantine
// old on that same clock (checked atomically by the node), provided the
// mark is still the same one: if the node lost its data again meanwhile,
// the mark is gone and the wait starts over. Any client can end a
// quarantine another one started; the mark carries the settings and the
// quarantine it runs for, so no client's own options can shorten it.
//
// Every node serves a quarantine, brand-new ones included: a node with no
// marker cannot show that it never granted a lock (a deployment whose
// every node was wiped looks exactly like a new one), and when in doubt it
// waits. Client.Bootstrap admits a new deployment at once on the
// operator's word.
//
// Before admitting, a client checks the node's peers, so that settings
// other than the deployment's can never take hold: it admits only if a
// peer is already admitted with its settings, or every peer answered and
// none carries a marker or a pending mark with other settings (the first
// admission of a deployment). See docs/protocol.md for why.
//
// Rejected designs: keying restarts on INFO's run_id (it changes on every
// clean restart with appendfsync always that lost nothing, and needs a
// separate round trip; the marker travels with the data it vouches for);
// membership records of admitted node names kept on the peers, so that a
// node nobody recorded could be admitted at once as new (names differ
// between clients, records erode over rolling restarts, and a client that
// stalled between the check and the admission admitted a node that had
// been used and wiped in between: each was a double grant).
type admission struct {
	c       *Client
	mu      sync.Mutex
	running []bool   // a background admission loop is active for node i
	logged  []string // pending id last logged per node (to log a quarantine once)
	seen    []atomic.Bool
	// quarantine: node i was last seen not admitted (for the
	// quorumlock.nodes.quarantined gauge only; no decision reads it).
	quarantine []atomic.Bool
	// conflict is the first node found admitted under other settings than
	// this client's. From then on the client starts no quarantine: its
	// settings are evidently not the deployment's (a deployment that
	// changes them uses Reconfigure), and a pending mark with its settings
	// would stand in the way of the deployment's own clients.
	conflict atomic.Pointer[ConfigError]
	ctx      context.Context
	cancel   context.CancelFunc
}

func newAdmission(c *Client) *admission {
	ctx, cancel := context.WithCancel(context.Background())
	n := len(c.nodes)
	return &admission{c: c, running: make([]bool, n), logged: make([]string, n), seen: make([]atomic.Bool, n),
		quarantine: make([]atomic.Bool, n), ctx: ctx, cancel: cancel}
}

func (a *admission) stop() { a.cancel() }

// conflicted records that a node was admitted under other settings.
func (a *admission) conflicted(e *ConfigError) { a.conflict.CompareAndSwap(nil, e) }

// saw records that node i answered as a node admitted with this client's
// settings: evidence that they are the deployment's, which also clears an
// earlier conflict (the deployment was bootstrapped again, say), so that a
// client does not stop starting quarantines for good.
func (a *admission) saw(i int) {
	if !a.seen[i].Load() {
		a.seen[i].Store(true)
	}
	if a.quarantine[i].Load() {
		a.quarantine[i].Store(false)
	}
	if a.conflict.Load() != nil {
		a.conflict.Store(nil)
	}
}

// reconfigured records that a node is being reconfigured to this client's
// settings: evidence that they are becoming the deployment's, which clears
// an earlier conflict as saw does.
func (a *admission) reconfigured() {
	if a.conflict.Load() != nil {
		a.conflict.Store(nil)
	}
}

// lost records that node i answered as a node that is not admitted.
func (a *admission) lost(i int) {
	a.seen[i].Store(false)
	a.quarantine[i].Store(true)
}

// quarantined counts the nodes last seen not admitted.
func (a *admission) quarantined() int64 {
	var n int64
	for i := range a.quarantine {
		if a.quarantine[i].Load() {
			n++
		}
	}
	return n
}

// seenPeer reports whether this client has seen a node other than i
// admitted with its settings: evidence that they are the deployment's.
func (a *admission) seenPeer(i int) bool {
	for j := range a.seen {
		if j != i && a.seen[j].Load() {
			return true
		}
	}
	return false
}

// unseen lists the nodes this client has not seen admitted.
func (a *admission) unseen() []int {
	var out []int
	for i := range a.seen {
		if !a.seen[i].Load() {
			out = append(out, i)
		}
	}
	return out
}

// admitNow tries once to admit each of nodes, in parallel, within ctx, and
// starts background loops for nodes that must still serve a quarantine.
// It reports whether any node was admitted, the shortest quarantine left
// among those that were not (0: none or unknown), and a *ConfigError when
// a node showed that this client's settings are not the deployment's.
func (a *admission) admitNow(ctx context.Context, nodes []int) (bool, time.Duration, error) {
	r := quorum.Start(nil, ctx, len(nodes), func(ctx context.Context, k int) (time.Duration, error) {
		ok, left, err := a.step(ctx, nodes[k])
		if !ok && err == nil {
			a.kick(nodes[k])
		}
		if ok {
			return -1, nil
		}
		return left, err
	})
	var admitted bool
	var soonest time.Duration
	var mismatch error
	for _, rep := range r.Await(ctx, len(nodes), func(quorum.Reply[time.Duration]) bool { return true }) {
		switch {
		case errors.Is(rep.Err, ErrConfigMismatch):
			mismatch = rep.Err
		case rep.Err != nil:
			a.c.cfg.logger.Warn("redlock: node admission failed", "node", nodes[rep.Node], errAttr(rep.Err))
		case rep.Val < 0:
			admitted = true
		case rep.Val > 0 && (soonest == 0 || rep.Val < soonest):
			soonest = rep.Val
		}
	}
	r.Cancel()
	a.c.spawn(func() { r.Wait() })
	return admitted, soonest, mismatch
}

// kick starts a background loop that admits node i when its quarantine
// is over, unless one is already running. The loop ends when the node is
// admitted, its settings conflict with the client's, or the Client closes;
// it retries other failures (unreachable peers) with a growing delay.
func (a *admission) kick(i int) {
	a.mu.Lock()
	if a.running[i] {
		a.mu.Unlock()
		return
	}
	a.running[i] = true
	a.mu.Unlock()
	a.c.spawn(func() {
		defer func() {
			a.mu.Lock()
			a.running[i] = false
			a.mu.Unlock()
		}()
		backoff := 10 * time.Millisecond
		for a.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(a.ctx, a.c.cfg.cleanup)
			ok, left, err := a.step(ctx, i)
			cancel()
			switch {
			case ok:
				return
			case errors.Is(err, ErrConfigMismatch):
				a.c.cfg.logger.Error("redlock: node admission refused", "node", i, errAttr(err))
				return
			case err != nil:
				a.c.cfg.logger.Warn("redlock: node admission failed; retrying", "node", i, errAttr(err), "in", backoff)
				left = backoff
				backoff = min(2*backoff, time.Second)
			case left <= 0:
				left = 10 * time.Millisecond
			}
			t := time.NewTimer(left)
			select {
			case <-t.C:
			case <-a.ctx.Done():
				t.Stop()
				return
			}
		}
	})
}

// step runs one admission check of node i (see check) in a span
// "quorumlock.admit", a child of the call that started it if any, and
// records what it found for the quarantine gauge.
func (a *admission) step(ctx context.Context, i int) (bool, time.Duration, error) {
	c := a.c
	span := noSpan
	if c.tracer != nil {
		ctx, span = c.tracer.Start(ctx, "quorumlock.admit")
	}
	ok, left, err := a.check(ctx, i)
	switch {
	case ok:
		a.quarantine[i].Store(false)
	case err == nil:
		a.quarantine[i].Store(true)
	}
	if span.IsRecording() {
		span.SetAttributes(attrNode.Int(i), attrAddr.String(c.nodes[i].name))
		switch {
		case ok:
			span.SetAttributes(attrOutcome.String("admitted"))
		case err == nil:
			span.SetAttributes(attrOutcome.String("quarantined"), attrLeft.Float64(ms(left)))
		case configErrorKind(err) != "":
			span.SetAttributes(attrOutcome.String("config"), attrConfigErr.String(configErrorKind(err)))
		default:
			span.SetAttributes(attrOutcome.String("error"))
		}
	}
	endSpan(span, err)
	return ok, left, err
}
