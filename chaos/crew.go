package chaos

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"time"
)

// counterKey is the lock's key: every worker increments the one counter.
const counterKey = "chaos:counter"

// newWorkerConfig is the configuration of worker w in run e: the scenario's
// settings, the topology's client settings, its links to the lock nodes,
// and what the fault asks of it.
func newWorkerConfig(e *env, dsn string, w int) workerConfig {
	sc := e.sc
	cfg := workerConfig{
		ID: w, Lock: e.topo.lock, DSN: dsn, Key: counterKey, Fencing: sc.Fencing,
		TTLms: int(sc.TTL.Milliseconds()), WorkMs: int(sc.Work.Milliseconds()),
		NodeMs: int(e.topo.nodeTimeout(sc.TTL).Milliseconds()), LockMs: 10_000,
		Sections: sc.Sections, NoQuar: !sc.Quarantine(),
		StallRate: sc.StallRate, StallMin: int(sc.StallMin.Milliseconds()), StallMax: int(sc.StallMax.Milliseconds()),
		Seed: e.seed, PollMs: int(sc.Poll.Milliseconds()), Style: sc.Style,
	}
	for n := range e.cluster.lockN {
		cfg.Nodes = append(cfg.Nodes, e.cluster.nodes[n].Addr())
		if e.cluster.prox != nil {
			cfg.Dial = append(cfg.Dial, e.cluster.prox[w][n].Addr())
		}
	}
	// A budget far above what the run needs: a worker that hangs ends.
	per := sc.Work + 25*time.Millisecond + time.Duration(sc.StallRate*float64(sc.StallMax))
	cfg.BudgetMs = int(max(90*time.Second, 3*time.Duration(sc.Sections*sc.Workers)*per).Milliseconds())
	if sc.Duration > 0 {
		// A timed run: the workers go on until the time is up.
		cfg.Sections = math.MaxInt32
		cfg.UntilNs = stampNs() + int64(sc.Duration)
		cfg.BudgetMs = int((sc.Duration + 90*time.Second).Milliseconds())
	}
	if e.fault.worker != nil {
		e.fault.worker(w, &cfg)
	}
	return cfg
}

// crew is a run's worker processes.
type crew struct {
	procs []*proc
}

// start starts one worker per configuration, in order.
func (c *crew) start(newCmd func() (*exec.Cmd, error), cfgs []workerConfig) error {
	for _, cfg := range cfgs {
		p, err := startWorker(newCmd, cfg)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
	}
	return nil
}

// holder is worker 0, the one the scripted faults single out.
func (c *crew) holder() *proc { return c.procs[0] }

// others are the workers but the holder.
func (c *crew) others() []*proc { return c.procs[1:] }

// wait waits until every worker has exited, reporting progress. A worker
// that ended without its statistics, and was not killed on purpose, is an
// error.
func (c *crew) wait(ctx context.Context, bar *progress) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, p := range c.procs {
		for {
			select {
			case <-p.exited:
			case <-tick.C:
				bar.update(c.done())
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
			break
		}
	}
	for _, p := range c.procs {
		if st, killed := p.result(); st == nil && !killed {
			return fmt.Errorf("chaos: worker %d ended without a report: %s", p.id, p.errTail())
		}
	}
	return nil
}

// done is the number of sections the workers have had accepted so far.
func (c *crew) done() int64 {
	var n int64
	for _, p := range c.procs {
		n += p.done.Load()
	}
	return n
}

// warm waits until the workers together have n accepted sections.
func (c *crew) warm(ctx context.Context, n int64) error {
	deadline := time.Now().Add(20 * time.Second)
	for c.done() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: workers did only %d sections in 20s before the fault", c.done())
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// stats returns each worker's final statistics (nil where it left none).
func (c *crew) stats() []*workerStats {
	out := make([]*workerStats, len(c.procs))
	for i, p := range c.procs {
		out[i], _ = p.result()
	}
	return out
}

// stop ends the workers that outlived their run.
func (c *crew) stop() {
	for _, p := range c.procs {
		p.stop()
	}
}
