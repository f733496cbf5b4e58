package chaos

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(&fault{
		name: "partition-1",
		rank: 47,
		doc: "one member of a consensus store cut off from its peers for a while (etcd: the leader; ZooKeeper: a follower), " +
			"with one client (worker 0) that reaches only it and the others only the majority",
		topologies: []string{Etcd3, ZK3},
		runs: map[string][]Scenario{
			"quick": {newRun(Etcd3, "none", 4, 40, Expect{Overlaps: Zero, Granted: true}),
				newRun(ZK3, "none", 4, 40, Expect{Overlaps: Zero, Granted: true})},
		},
		prepare: func(ctx context.Context, e *env) error {
			if e.topo.lock == lockZK {
				return lowestFollower(ctx, e)
			}
			return leaderFirst(ctx, e)
		},
		worker: sides,
		script: isolateFirst,
		judge:  minorityRefused,
	})
}

// partitionWindow is how long the server stays cut off at least: long
// enough for its session's holder to expire and the majority to grant the
// lock again. On a loaded machine an election and a lease's expiry can
// take longer, so the cut lasts until the majority's side has finished a
// section, up to partitionMax, after which the run fails for want of one.
const (
	partitionWindow = 6 * time.Second
	partitionMax    = 20 * time.Second
)

// lowestFollower checks that node 0, the server the fault cuts off, is a
// follower. ZooKeeper lets the higher of two servers dial the lower one
// back at the address the lower one sent in its first message, its own
// listening address, so election traffic between them bypasses the
// proxies; for the lowest server id every such connection ends at its
// own election port, where proxies are not needed to see it: the
// quorum links (follower to leader) all run through proxies, and a
// follower cut from them cannot sync and serves nobody. A leader cut off
// this way would still hear the election, so node 0 must not lead (the
// highest id wins the first election, so it does not).
func lowestFollower(ctx context.Context, e *env) error {
	n, err := clusterLeader(ctx, e)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("chaos: ZooKeeper server 1 leads, and a cut-off leader would still hear the election")
	}
	return nil
}

// leaderFirst moves the member that leads to the front of the lock
// nodes, so that the fault cuts off the leader, and worker 0 is on the
// old leader's side. (etcd's members talk through gates that see every
// peer request, peergate.go, so the cut is whole.)
func leaderFirst(ctx context.Context, e *env) error {
	n, err := clusterLeader(ctx, e)
	if err != nil {
		return err
	}
	ns := e.cluster.nodes
	ns[0], ns[n] = ns[n], ns[0]
	return nil
}

// sides gives worker 0 the first lock node only (the one the fault cuts
// off) and the other workers the rest. Worker 0 gives up a lock call
// after a second, so that it asks again and again while it is cut off:
// each of those calls must be refused.
func sides(w int, cfg *workerConfig) {
	if w == 0 {
		cfg.Nodes = cfg.Nodes[:1]
		cfg.LockMs = 1000
		return
	}
	cfg.Nodes = cfg.Nodes[1:]
}

// isolator is a lock node that can be cut off from its peers while its
// clients still reach it.
type isolator interface{ Isolate(on bool) error }

// isolateFirst cuts node 0 off from its peers for partitionWindow (or
// longer, see there), and
// records how long it took until a worker on the majority's side
// finished a section.
func isolateFirst(ctx context.Context, e *env) error {
	n, ok := e.cluster.nodes[0].(isolator)
	if !ok {
		return fmt.Errorf("chaos: this backend's %s servers cannot be cut off from their peers", e.topo.name)
	}
	if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
		return err
	}
	majority := func() int64 { return e.crew.done() - e.crew.holder().done.Load() }
	before, minority := majority(), e.crew.holder().done.Load()
	if err := n.Isolate(true); err != nil {
		return err
	}
	t0 := time.Now()
	e.log.mark(true)
	var again time.Duration
	for ctx.Err() == nil {
		if again == 0 && majority() > before {
			again = time.Since(t0)
		}
		if d := time.Since(t0); d >= partitionMax || (d >= partitionWindow && again > 0) {
			break
		}
		_ = sleep(ctx, 5*time.Millisecond)
	}
	cut := time.Since(t0)
	e.log.mark(false)
	err := n.Isolate(false)
	if again > 0 {
		e.log.setBlocked(again)
	}
	role := "the leader"
	if e.topo.lock == lockZK {
		role = "server 1, a follower"
	}
	e.log.note("node 0 ("+role+") cut off from its peers for %v; the majority's side finished its first section %v after the cut, "+
		"%d sections in all; worker 0, on its side, %d",
		cut.Round(time.Millisecond), again.Round(time.Millisecond), majority()-before, e.crew.holder().done.Load()-minority)
	return err
}

// minorityRefused fails the run when worker 0, which reached only the
// cut-off leader, was granted a lock it asked for after the cut and
// before the heal: a minority must refuse.
func minorityRefused(e *env, _ *Result, h *history, stats []*workerStats) []string {
	rec := e.log.record()
	n := 0
	for _, s := range h.sections {
		if s.Worker == 0 && s.Call > rec.from && s.Got < rec.to {
			n++
		}
	}
	if n > 0 {
		return []string{fmt.Sprintf("worker 0, cut off with node 0, was granted %d locks it asked for during the partition", n)}
	}
	if len(stats) == 0 || stats[0] == nil || stats[0].Failures == 0 {
		return []string{"worker 0, cut off with node 0, was never refused: it did not ask while cut off"}
	}
	if rec.blocked == 0 {
		return []string{"the majority's side finished no section during the partition"}
	}
	return nil
}
