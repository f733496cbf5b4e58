package redlock

import (
	"context"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The waker's Pub/Sub side: one subscriber connection per node, the
// release notices it reads, and when a key's subscription is live.

// subscriber serialises SUBSCRIBE/UNSUBSCRIBE for one node in a goroutine
// of its own, so their order matches the order of waiter changes.
type subscriber struct {
	ps  driver.Subscription
	ops chan subOp
	own bool // subscribed to the Client's own notice channel (run's goroutine only)
}

type subOp struct {
	sub     bool
	channel string
	kw      *keyWaiters // with sub: counts the confirmation
}

func (w *waker) sendLocked(op subOp) {
	if !w.c.cfg.wake {
		return
	}
	for i, nd := range w.c.nodes {
		s := w.subs[i]
		if s == nil {
			s = &subscriber{ps: nd.conn.Subscribe(), ops: make(chan subOp, 1024)}
			w.subs[i] = s
			w.c.spawn(func() { w.run(i, s) })
		}
		select {
		case s.ops <- op:
		default:
			// The node is too slow to keep up; its waiters fall back to polling.
		}
	}
}

func (w *waker) run(node int, s *subscriber) {
	var listening sync.WaitGroup
	defer listening.Wait()
	started := false
	subscribe := func(ch string) error {
		ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.cleanup)
		defer cancel()
		return s.ps.Subscribe(ctx, ch)
	}
	for op := range s.ops {
		var err error
		if op.sub {
			// The Client's own channel first: a key's subscription counts
			// as confirmed on a node only with it, since the notices that
			// name this Client's waiters come that way.
			if !s.own {
				if err = subscribe(script.WakeChannel(w.id)); err == nil {
					s.own = true
				}
			}
			if err == nil {
				err = subscribe(op.channel)
			}
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.cleanup)
			err = s.ps.Unsubscribe(ctx, op.channel)
			cancel()
		}
		if err != nil {
			w.c.cfg.logger.Debug("redlock: release subscription failed", "channel", op.channel, "err", err)
			continue
		}
		if op.sub {
			w.confirmed(op.kw)
		}
		if !started && op.sub {
			started = true
			msgs := s.ps.Messages()
			listening.Go(func() {
				for m := range msgs {
					w.deliver(node, m.Channel, m.Payload)
				}
			})
		}
	}
}

// deliver hands one Pub/Sub message from node to notify, or to handedBy
// for a hand-off (see script.ParseNotice).
func (w *waker) deliver(node int, channel, payload string) {
	n, ok := script.ParseNotice(channel, payload)
	switch {
	case !ok:
	case n.Handed:
		if w.c.moved(w.c.ident.proven(), node, n.Server) {
			w.c.proveSoon(w.c.cfg.maxTTL)
		}
		w.handedBy(node, n.Key, n.Names, n.Server)
	default:
		w.notify(n.Key, n.Names)
	}
}

// confirmed counts one node's confirmation of kw's subscription.
func (w *waker) confirmed(kw *keyWaiters) {
	w.mu.Lock()
	defer w.mu.Unlock()
	kw.acked++
	if kw.liveSince.IsZero() && kw.acked >= quorum.Majority(len(w.c.nodes)) {
		kw.liveSince = time.Now()
		close(kw.ready)
	}
}

// subscribed returns a channel that is closed once a majority of nodes
// confirmed key's subscription (never, for a key without waiters).
func (w *waker) subscribed(key string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if kw := w.waiters[key]; kw != nil {
		return kw.ready
	}
	return nil
}
