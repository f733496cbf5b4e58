package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/quorum"
)

// Restart quarantine (DESIGN.md §3, "delayed restart").
//
// A node votes only while it carries an admission marker key; the acquire
// script refuses to take a lock on a node without one. A node that restarts
// without persistence (or fails over to a replica, or is flushed) loses the
// marker together with the locks it had granted, so it stops voting by
// itself, at once, without any client having to notice the restart.
//
// Re-admitting it must wait until every lock it may have forgotten has
// expired: one maximum TTL plus drift after it lost its state. The client
// cannot learn when that was, so the wait starts when a client first finds
// the node unadmitted, which is later and therefore safe: it writes a
// pending mark stamped with the node's clock, and the node is admitted once
// the stamp is one quarantine old on that same clock (checked atomically by
// the node), provided the mark is still there: if the node lost its data
// again meanwhile, the mark is gone and the wait starts over. Timing the
// wait on the node's clock lets any client finish it; it is the same clock
// the node expires lock keys with, so a node whose clock jumps forward,
// which already breaks Redlock's expiry, can also cut its quarantine short.
//
// A brand-new node must not wait, and cannot have granted anything (it never
// had a marker). Every node keeps a record of the names of admitted nodes;
// a node none of whose peers has a record of it is new. Records are written
// to a majority before the marker, and "new" needs n-q+1 peers to say they
// have no record, so a node that was ever admitted can never pass as new.
//
// Rejected design: keying restarts on INFO's run_id. It changes on every
// restart, including clean restarts with appendfsync always that lost
// nothing, and reading it needs a separate round trip; the marker travels
// with the data it vouches for.
type admission struct {
	c      *Client
	mu     sync.Mutex
	st     []admitState
	seen   []atomic.Bool // node i was seen admitted by this client
	ctx    context.Context
	cancel context.CancelFunc
}

type admitState struct {
	mark    string // pending mark last seen (to log a quarantine once)
	running bool   // a background admission loop is active
}

func newAdmission(c *Client) *admission {
	ctx, cancel := context.WithCancel(context.Background())
	return &admission{c: c, st: make([]admitState, len(c.nodes)), seen: make([]atomic.Bool, len(c.nodes)), ctx: ctx, cancel: cancel}
}

func (a *admission) stop() { a.cancel() }

// saw records that node i answered as an admitted node.
func (a *admission) saw(i int) {
	if !a.seen[i].Load() {
		a.seen[i].Store(true)
	}
}

// lost records that node i answered as a node that is not admitted.
func (a *admission) lost(i int) { a.seen[i].Store(false) }

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

// quarantine is how long a node that lost its state is kept from voting.
func (a *admission) quarantine() time.Duration {
	return a.c.cfg.maxTTL + drift.Drift(a.c.cfg.maxTTL, a.c.cfg.factor)
}

// admitNow tries once to admit each of nodes, in parallel, within ctx, and
// starts background loops for nodes that must serve a quarantine. It
// reports whether any node was admitted.
func (a *admission) admitNow(ctx context.Context, nodes []int) bool {
	r := quorum.Start(ctx, len(nodes), func(ctx context.Context, k int) (bool, error) {
		ok, left, err := a.step(ctx, nodes[k])
		if !ok && err == nil && left > 0 {
			a.kick(nodes[k])
		}
		return ok, err
	})
	var any bool
	for _, rep := range r.Await(ctx, len(nodes), func(quorum.Reply[bool]) bool { return true }) {
		if rep.Err != nil {
			a.c.cfg.logger.Warn("redlock: node admission failed", "node", nodes[rep.Node], "err", rep.Err)
		}
		any = any || rep.Val
	}
	r.Cancel()
	a.c.spawn(func() { r.Wait() })
	return any
}

// kick starts a background loop that admits node i when its quarantine
// is over, unless one is already running.
func (a *admission) kick(i int) {
	a.mu.Lock()
	if a.st[i].running {
		a.mu.Unlock()
		return
	}
	a.st[i].running = true
	a.mu.Unlock()
	a.c.spawn(func() {
		defer func() {
			a.mu.Lock()
			a.st[i].running = false
			a.mu.Unlock()
		}()
		for a.ctx.Err() == nil {
			ctx, cancel := context.WithTimeout(a.ctx, a.c.cfg.cleanup)
			ok, left, err := a.step(ctx, i)
			cancel()
			if ok || err != nil {
				if err != nil {
					a.c.cfg.logger.Warn("redlock: node admission failed", "node", i, "err", err)
				}
				return
			}
			if left <= 0 {
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

// step runs one admission check of node i. It returns admitted, or how much
// of the quarantine is left, or an error when the node or its peers did not
// answer well enough to decide.
func (a *admission) step(ctx context.Context, i int) (bool, time.Duration, error) {
	c := a.c
	nd := c.nodes[i]
	res, err := pendingScript.Run(ctx, nd.sc, []string{markerKey, pendingKey}, newValue()).Slice()
	if err != nil {
		return false, 0, c.nodeErr(i, err)
	}
	if len(res) < 2 {
		return false, 0, c.nodeErr(i, fmt.Errorf("pending script returned %d values", len(res)))
	}
	status, _ := res[0].(int64)
	mark, _ := res[1].(string)
	if status == 1 {
		a.seen[i].Store(true)
		return true, 0, nil
	}
	if len(res) != 3 {
		return false, 0, c.nodeErr(i, fmt.Errorf("pending script returned %d values", len(res)))
	}
	nowS, _ := res[2].(string)
	now, err1 := strconv.ParseInt(nowS, 10, 64)
	_, stampS, _ := strings.Cut(mark, ":")
	stamp, err2 := strconv.ParseInt(stampS, 10, 64)
	if err1 != nil || err2 != nil {
		return false, 0, c.nodeErr(i, fmt.Errorf("pending mark %q at %q is malformed", mark, nowS))
	}

	rec, norec, err := a.records(ctx, i)
	if len(c.nodes) == 1 {
		// A lone node has no peers to vouch that it is new: assume it lost
		// its state, and let it serve one quarantine.
		rec, err = 1, nil
	}
	if rec == 0 && norec < len(c.nodes)-c.quorum+1 {
		return false, 0, fmt.Errorf("redlock: cannot tell whether node %d is new or restarted: %d of its peers answered: %w", i, norec, err)
	}
	if rec > 0 {
		// The quarantine runs on the node's own clock from the pending
		// mark's stamp, so any client can end it, including short-lived
		// ones (quorumlock run) that never see it through.
		left := a.quarantine() - time.Duration(now-stamp)*time.Microsecond
		a.mu.Lock()
		if a.st[i].mark != mark {
			a.st[i].mark = mark
			c.cfg.logger.Warn("redlock: node lost its state; quarantined", "node", i, "addr", nd.name, "left", left)
		}
		a.mu.Unlock()
		if left > 0 {
			return false, left, nil
		}
	}
	if err := a.writeRecords(ctx, i, mark); err != nil {
		return false, 0, err
	}
	requireMark := "0"
	if rec > 0 {
		requireMark = "1"
	}
	ok, err := admitScript.Run(ctx, nd.sc, []string{markerKey, pendingKey}, mark, requireMark, a.quarantine().Microseconds()).Int64()
	if err != nil {
		return false, 0, c.nodeErr(i, err)
	}
	if ok != 1 {
		return false, 0, nil // lost its data again while we waited: start over
	}
	a.seen[i].Store(true)
	c.cfg.logger.Info("redlock: node admitted", "node", i, "addr", nd.name, "restarted", rec > 0)
	return true, 0, nil
}

// records asks node i's peers whether they have a record of it.
func (a *admission) records(ctx context.Context, i int) (rec, norec int, err error) {
	c := a.c
	r := quorum.Start(ctx, len(c.nodes), func(ctx context.Context, j int) (int64, error) {
		if j == i {
			return 0, errSelf
		}
		return recordScript.Run(ctx, c.nodes[j].sc, []string{membersKey}, "get", c.nodes[i].name).Int64()
	})
	// Stop as soon as n-q+1 peers said "no record" (new for sure) or that
	// became impossible; a "record" reply among those seen means restarted.
	noRecord := func(rep quorum.Reply[int64]) bool { return rep.Err == nil && rep.Val == 0 }
	var errs []error
	for _, rep := range r.Await(ctx, len(c.nodes)-c.quorum+1, noRecord) {
		switch {
		case errors.Is(rep.Err, errSelf):
		case rep.Err != nil:
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
		case rep.Val == 1:
			rec++
		default:
			norec++
		}
	}
	r.Cancel()
	c.spawn(func() { r.Wait() })
	return rec, norec, errors.Join(errs...)
}

var errSelf = errors.New("self")

// writeRecords records node i (and every node this client has seen
// admitted, to restore what i may have lost) on a majority of nodes.
func (a *admission) writeRecords(ctx context.Context, i int, mark string) error {
	c := a.c
	r := quorum.Start(ctx, len(c.nodes), func(ctx context.Context, j int) (bool, error) {
		if _, err := recordScript.Run(ctx, c.nodes[j].sc, []string{membersKey}, "set", c.nodes[i].name, mark).Result(); err != nil {
			return false, err
		}
		if j != i {
			return true, nil
		}
		for k := range c.nodes {
			if k != i && a.seen[k].Load() {
				if _, err := recordScript.Run(ctx, c.nodes[i].sc, []string{membersKey}, "set", c.nodes[k].name, "restored").Result(); err != nil {
					return false, err
				}
			}
		}
		return true, nil
	})
	ok := func(rep quorum.Reply[bool]) bool { return rep.Err == nil }
	replies := r.Await(ctx, c.quorum, ok) // the rest are written in the background
	c.spawn(func() { r.Wait() })
	var yes int
	var errs []error
	for _, rep := range replies {
		if rep.Err != nil {
			errs = append(errs, c.nodeErr(rep.Node, rep.Err))
		} else {
			yes++
		}
	}
	if yes < c.quorum {
		return errors.Join(append([]error{fmt.Errorf("redlock: membership record of node %d reached %d nodes, %d needed", i, yes, c.quorum)}, errs...)...)
	}
	return nil
}
