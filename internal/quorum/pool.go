package quorum

import (
	"sync"
	"time"
)

// Pool runs a Round's calls on goroutines it keeps after they return, so
// that the next call reuses one instead of starting a goroutine. A
// goroutine that runs a Redis client call grows its stack from the
// runtime's small starting size, and copying the stack as it grows was
// the largest cost of a round's fan-out in a profile of redlock (0.22 s
// of 0.82 s sampled under its frames); a kept goroutine has grown it
// already. The most recently idle goroutine is reused first, so under a
// steady load the same few stay warm, and each use retires one goroutine
// that has been idle for longer than the pool's idle time. At most maxIdle
// wait at once: calls that block for long (a frozen node holds each call
// until its deadline) can run up thousands of goroutines, and those beyond
// maxIdle exit when their call returns instead of waiting for work. Close
// stops the idle ones; after Close, each call gets a goroutine of its own
// again.
//
// A nil *Pool is valid: every call gets a goroutine of its own.
type Pool struct {
	idleFor time.Duration
	maxIdle int
	mu      sync.Mutex
	idle    []*worker // most recently idle last
	closed  bool
}

type worker struct {
	work  chan func() // buffered: a hand-off never blocks; nil retires the worker
	since time.Time   // when it went idle
}

// NewPool returns a pool that keeps at most maxIdle goroutines waiting for
// work, each retired once it has been idle for longer than idleFor
// (checked when the pool is next used) or at Close.
func NewPool(idleFor time.Duration, maxIdle int) *Pool {
	return &Pool{idleFor: idleFor, maxIdle: maxIdle}
}

// Go runs f on an idle goroutine of the pool, or on a new one that joins
// the pool when f returns.
func (p *Pool) Go(f func()) {
	if p == nil {
		go f()
		return
	}
	p.mu.Lock()
	n := len(p.idle)
	if n == 0 || p.closed {
		closed := p.closed
		p.mu.Unlock()
		if closed {
			go f()
		} else {
			go p.run(&worker{work: make(chan func(), 1)}, f)
		}
		return
	}
	w := p.idle[n-1]
	p.idle[n-1] = nil
	p.idle = p.idle[:n-1]
	var old *worker
	if len(p.idle) > 0 && time.Since(p.idle[0].since) > p.idleFor {
		old = p.idle[0]
		copy(p.idle, p.idle[1:])
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
	}
	p.mu.Unlock()
	w.work <- f
	if old != nil {
		old.work <- nil
	}
}

func (p *Pool) run(w *worker, f func()) {
	for f != nil {
		f()
		if !p.park(w) {
			return
		}
		f = <-w.work
	}
}

// park puts w back among the idle goroutines, unless the pool is closed
// or has maxIdle of them already.
func (p *Pool) park(w *worker) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.maxIdle {
		return false
	}
	w.since = time.Now()
	p.idle = append(p.idle, w)
	return true
}

// Close retires the idle goroutines; those still running a call retire
// when it returns. Go still works after Close.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, w := range idle {
		w.work <- nil
	}
}

// idleCount is the number of idle goroutines (for tests).
func (p *Pool) idleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
