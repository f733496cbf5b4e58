package suite

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
)

// entry is one implementation's part in a scenario.
type entry struct {
	scenario string
	variant  string
	l        impl.Locker
	key      string
	ops      int           // per block
	timeout  time.Duration // per operation; 0: none (no extra allocation)
	s        sampler
	cost     cost // measured when cost.probes is set
}

func (e *entry) op(ctx context.Context) {
	if e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.timeout)
		defer cancel()
	}
	d, err := impl.Op(ctx, e.l, e.key)
	if err != nil {
		e.s.fail(err)
		return
	}
	e.s.lat = append(e.s.lat, d)
}

func (e *entry) result() Result {
	r := e.s.result(e.scenario, e.l.Name())
	r.Variant = e.variant
	e.cost.fill(&r, e.s.ops)
	return r
}

// warm runs n unmeasured operations of every entry.
func warm(ctx context.Context, es []*entry, n int) {
	for _, e := range es {
		for range n {
			if ctx.Err() != nil {
				return
			}
			if rel, err := e.l.Lock(ctx, e.key); err == nil {
				_ = rel(ctx)
			}
		}
	}
}

// interleave runs blocks rounds; in round b the entries run in rotated
// order starting at entry b, each doing its ops operations back to back.
// Allocations are counted per entry over its own stretches only.
func interleave(ctx context.Context, es []*entry, blocks int) error {
	for b := range blocks {
		for k := range es {
			e := es[(b+k)%len(es)]
			e.cost.begin(ctx)
			a0, c0 := allocs(), impl.Calls()
			n := 0
			for ; n < e.ops && ctx.Err() == nil; n++ {
				e.op(ctx)
			}
			e.s.allocs += allocs() - a0
			e.s.calls += impl.Calls() - c0
			e.cost.end(ctx)
			e.s.ops += n
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}
