package chaos

import (
	"context"
	"time"
)

func init() {
	register(&fault{
		name:       "slow-1",
		rank:       60,
		doc:        "100 ms added to every reply of one primary, for every client",
		topologies: []string{Redlock5},
		runs: map[string][]Scenario{
			"quick": {newRun(Redlock5, "none", 4, 40, expectSafe)},
		},
		script: slowNode,
	})
}

// slowNode delays node 0's replies by more than the per-node timeout, for
// the rest of the run.
func slowNode(ctx context.Context, e *env) error {
	if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
		return err
	}
	e.log.mark(true)
	for _, ps := range e.cluster.prox {
		ps[0].SetLatency(100 * time.Millisecond)
	}
	e.log.note("100ms added to node 0's replies for the rest of the run")
	return nil
}
