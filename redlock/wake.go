package redlock

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// waker wakes Lock's waiters when a holder releases, so a hand-off costs
// about one round trip instead of a poll interval. Releases by this Client
// wake local waiters directly; releases by other processes reach them
// through Pub/Sub: the release script publishes on the key's channel on
// every node, and the waker keeps one subscriber connection per node,
// subscribed to the channels of the keys that have waiters.
//
// A missed message only costs a poll: waiters also retry on the retry
// policy's delay, so Pub/Sub is an optimisation, never needed for safety or
// progress.
type waker struct {
	c       *Client
	mu      sync.Mutex
	waiters map[string]map[string]chan int // key -> waiter id -> channel
	subs    []*subscriber                  // per node, nil until first needed
	closed  bool
}

// subscriber serialises SUBSCRIBE/UNSUBSCRIBE for one node in a goroutine
// of its own, so their order matches the order of waiter changes.
type subscriber struct {
	ps  *redis.PubSub
	ops chan subOp
}

type subOp struct {
	sub     bool
	channel string
}

// Positions a wake-up carries: first and second in the key's line, or
// anyone (a release that named nobody, or a local one).
const (
	wakeFirst  = 0
	wakeSecond = 1
	wakeAnyone = 2
)

func newWaker(c *Client) *waker {
	return &waker{c: c, waiters: map[string]map[string]chan int{}, subs: make([]*subscriber, len(c.nodes))}
}

// register adds waiter id for key. The returned channel receives the
// waiter's position when the key may have been released; unregister must
// be called when the waiter stops waiting.
func (w *waker) register(key, id string) (ch chan int, unregister func()) {
	ch = make(chan int, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ch, func() {}
	}
	set := w.waiters[key]
	if set == nil {
		set = map[string]chan int{}
		w.waiters[key] = set
		w.sendLocked(subOp{sub: true, channel: releaseChannel(key)})
	}
	set[id] = ch
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(set, id)
		if len(set) == 0 && w.waiters[key] != nil {
			delete(w.waiters, key)
			if !w.closed {
				w.sendLocked(subOp{sub: false, channel: releaseChannel(key)})
			}
		}
	}
}

// local wakes this Client's waiters for key.
func (w *waker) local(key string) { w.notify(key, "") }

// notify delivers a release of key: to the waiters named in names (space
// separated, first in line first), or to every waiter when it names
// nobody. Names of other Clients' waiters are ignored.
func (w *waker) notify(key, names string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.waiters[key]
	if len(set) == 0 {
		return
	}
	send := func(ch chan int, pos int) {
		select {
		case ch <- pos:
		default:
		}
	}
	if names == "" {
		for _, ch := range set {
			send(ch, wakeAnyone)
		}
		return
	}
	pos := wakeFirst
	for name := range strings.SplitSeq(names, " ") {
		if ch, ok := set[name]; ok {
			send(ch, pos)
		}
		pos++
	}
}

func (w *waker) sendLocked(op subOp) {
	if !w.c.cfg.wake {
		return
	}
	for i, nd := range w.c.nodes {
		if nd.uc == nil {
			continue
		}
		s := w.subs[i]
		if s == nil {
			s = &subscriber{ps: nd.uc.Subscribe(context.Background()), ops: make(chan subOp, 1024)}
			w.subs[i] = s
			w.c.spawn(func() { w.run(s) })
		}
		select {
		case s.ops <- op:
		default:
			// The node is too slow to keep up; its waiters fall back to polling.
		}
	}
}

func (w *waker) run(s *subscriber) {
	var listening sync.WaitGroup
	defer listening.Wait()
	started := false
	for op := range s.ops {
		ctx, cancel := context.WithTimeout(context.Background(), w.c.cfg.cleanup)
		var err error
		if op.sub {
			err = s.ps.Subscribe(ctx, op.channel)
		} else {
			err = s.ps.Unsubscribe(ctx, op.channel)
		}
		cancel()
		if err != nil {
			w.c.cfg.logger.Debug("redlock: release subscription failed", "channel", op.channel, "err", err)
			continue
		}
		if !started && op.sub {
			started = true
			msgs := s.ps.Channel()
			listening.Go(func() {
				for m := range msgs {
					w.notify(strings.TrimPrefix(m.Channel, channelPrefix), m.Payload)
				}
			})
		}
	}
}

// close stops the subscribers and wakes nobody; Lock's waiters notice the
// Client is closed on their next attempt.
func (w *waker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	for _, s := range w.subs {
		if s != nil {
			close(s.ops)
			_ = s.ps.Close()
		}
	}
}
