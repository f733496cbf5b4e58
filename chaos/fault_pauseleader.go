package chaos

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(&fault{
		name:       "pause-leader",
		rank:       45,
		doc:        "SIGSTOP of the etcd or ZooKeeper leader for a while, then SIGCONT",
		topologies: []string{Etcd3, ZK3},
		runs: map[string][]Scenario{
			// A holder whose keep-alive stream went to the stopped member
			// may lose its lease mid-section, so lost updates are possible
			// without fencing; two valid leases at once are not. The same
			// holds for a ZooKeeper session on the stopped leader.
			"quick": {newRun(Etcd3, "none", 4, 40, Expect{Overlaps: Zero}), newRun(ZK3, "none", 4, 40, Expect{Overlaps: Zero})},
		},
		// A call stuck on the stopped member is given up after a second
		// and tried again: gRPC will not ping a connection more often
		// than every 10 s, so the client keeps sending a third of its
		// calls to a member that cannot answer.
		// (ZooKeeper's client moves to another server by itself once
		// its server stops answering, within two thirds of the session.)
		worker: func(_ int, cfg *workerConfig) {
			if cfg.Lock == lockEtcd {
				cfg.LockMs = 1000
			}
		},
		script: pauseLeader,
	})
}

// leaderPause is how long the leader stays stopped: an election timeout
// (500 to 1000 ms) for the others to elect a new leader, with time left
// for the clients to get locks from them.
const leaderPause = 3 * time.Second

// pauseLeader stops the member that leads when the fault starts (an etcd
// member or a ZooKeeper server): the two
// others must elect a new leader before anyone gets the lock again, and
// the stopped one must not act on its old term when it resumes.
func pauseLeader(ctx context.Context, e *env) error {
	if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
		return err
	}
	n, err := clusterLeader(ctx, e)
	if err != nil {
		return err
	}
	node := e.cluster.nodes[n]
	before := e.crew.done()
	e.log.mark(true)
	if err := node.Pause(); err != nil {
		return err
	}
	err = sleep(ctx, leaderPause)
	e.log.mark(false)
	e.log.note("leader (member %d) stopped for %v after %d sections; %d sections finished meanwhile",
		n, leaderPause, before, e.crew.done()-before)
	if rerr := node.Resume(); rerr != nil {
		return fmt.Errorf("chaos: resume member %d: %w", n, rerr)
	}
	return err
}
