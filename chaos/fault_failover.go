package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

func init() {
	register(&fault{
		name:       "failover",
		rank:       120,
		doc:        "replication held back, primary killed, replica promoted while the lock is held",
		topologies: []string{SingleReplica},
		runs: map[string][]Scenario{
			"smoke": {doubleGrantRun(SingleReplica, "none", 4, expectUnsafe)},
			"quick": {
				doubleGrantRun(SingleReplica, "none", 10, expectUnsafe),
				doubleGrantRun(SingleReplica, "claim-first", 10, Expect{Overlaps: Positive, Lost: Zero}),
			},
		},
		worker:  doubleGrantGates,
		prepare: holdBackReplication,
		script:  doubleGrant(failover),
	})
}

// holdBackReplication blackholes the replication link before the holder
// locks, so the replica never receives its key.
func holdBackReplication(_ context.Context, e *env) error {
	e.cluster.repl.Blackhole(true)
	e.log.note("replication link blackholed: the replica stops receiving writes")
	return nil
}

// failover kills the primary while the replication link is held back,
// promotes the replica and points every client at it.
func failover(ctx context.Context, e *env) (func(), error) {
	primary, replica := e.cluster.nodes[0], e.cluster.nodes[1]
	if err := primary.Kill(); err != nil {
		return nil, err
	}
	e.cluster.repl.Cut(true) // what the replica never received is gone with the primary
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Do(pctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return nil, fmt.Errorf("chaos: promote the replica: %w", err)
	}
	for _, ps := range e.cluster.prox {
		ps[0].Retarget(replica.Addr())
	}
	e.log.note("holder locked the primary; primary killed, replica (which never saw the key) promoted, clients moved to it")
	return nil, nil
}
