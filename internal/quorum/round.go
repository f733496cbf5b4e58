package quorum

import (
	"context"
	"sync"
)

// Reply is one node's answer in a Round.
type Reply[T any] struct {
	Node int // index of the node, 0..n-1
	Val  T
	Err  error
}

// Round is one request sent to n nodes at once. Create it with Start. Await
// and Wait may be called from one goroutine at a time; Cancel from any.
type Round[T any] struct {
	n      int
	ch     chan Reply[T]
	cancel context.CancelFunc
	wg     sync.WaitGroup
	got    int  // replies handed out by Await so far
	waited bool // Wait has collected the rest
	rest   []Reply[T]
}

// Start calls call(ctx, i) for every node i in [0, n), each on a
// goroutine of p (see Pool), or of its own when p is nil, and returns at
// once. The ctx each call gets is derived from ctx and is cancelled by
// Cancel. A panic in call is not recovered.
func Start[T any](p *Pool, ctx context.Context, n int, call func(ctx context.Context, node int) (T, error)) *Round[T] {
	cctx, cancel := context.WithCancel(ctx)
	return StartOwned(p, cctx, cancel, n, call)
}

// StartOwned is Start for a caller that already derived a context for this
// round alone: the calls get ctx itself, and cancel is what Cancel calls
// (and Wait, once every call has returned). It saves Start's derived
// context, which a hot path pays for in allocations.
func StartOwned[T any](p *Pool, ctx context.Context, cancel context.CancelFunc, n int, call func(ctx context.Context, node int) (T, error)) *Round[T] {
	r := &Round[T]{n: n, ch: make(chan Reply[T], n), cancel: cancel}
	r.wg.Add(n)
	for i := range n {
		p.Go(func() {
			defer r.wg.Done()
			v, err := call(ctx, i)
			r.ch <- Reply[T]{Node: i, Val: v, Err: err}
		})
	}
	return r
}

// Await returns the replies that arrive, in arrival order, until need of
// them satisfy ok, or success has become impossible (too many replies failed
// ok), or every node has replied, or ctx is done, whichever comes first. The
// calls still running go on; see Cancel and Wait. Successive Awaits continue
// where the previous one stopped.
func (r *Round[T]) Await(ctx context.Context, need int, ok func(Reply[T]) bool) []Reply[T] {
	return r.AwaitDiscounting(ctx, need, ok, nil)
}

// AwaitDiscounting is Await that gives up early on nodes the caller
// expects not to answer in time (discount(node) true, for example nodes
// that missed the previous round's deadline): success is deemed impossible
// as soon as the nodes still expected to answer cannot make up need. A
// discounted node that does answer in time counts like any other, so
// discounting can only make a round fail sooner, never succeed wrongly.
// A nil discount discounts nothing.
func (r *Round[T]) AwaitDiscounting(ctx context.Context, need int, ok func(Reply[T]) bool, discount func(node int) bool) []Reply[T] {
	var out []Reply[T]
	if r.got < r.n {
		out = make([]Reply[T], 0, r.n-r.got) // one allocation, not one per doubling
	}
	good, bad := 0, 0
	written := 0 // discounted nodes that have not answered yet
	var small [16]bool
	var pending []bool // discounted and not answered yet
	if discount != nil {
		if r.n <= len(small) {
			pending = small[:r.n] // stays on the stack
		} else {
			pending = make([]bool, r.n)
		}
		// Asked once, here: a node's answer may change what discount
		// says of it (a reply clears a missed deadline) before the
		// reply reaches us, and a discount counted at the start must be
		// taken back by that reply.
		for i := range r.n {
			if discount(i) {
				pending[i] = true
				written++
			}
		}
	}
	for r.got < r.n && !Decided(r.n, need, good, bad+written) {
		select {
		case rep := <-r.ch:
			r.got++
			out = append(out, rep)
			if pending != nil && pending[rep.Node] {
				pending[rep.Node] = false
				written--
			}
			if ok(rep) {
				good++
			} else {
				bad++
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// Cancel cancels the context of every call that is still running. It does
// not wait for them; a call that ignores its context runs on until it
// returns by itself.
func (r *Round[T]) Cancel() { r.cancel() }

// Wait blocks until every call has returned and returns the replies that
// Await did not hand out, in arrival order. It does not cancel anything by
// itself. Calling it more than once returns the same replies.
func (r *Round[T]) Wait() []Reply[T] {
	if !r.waited { // Wait is never called concurrently (see Round)
		r.waited = true
		for ; r.got < r.n; r.got++ {
			r.rest = append(r.rest, <-r.ch)
		}
		r.wg.Wait()
		r.cancel() // release the derived context's resources
	}
	return r.rest
}
