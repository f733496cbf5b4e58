package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"
)

// Options configures a suite run.
type Options struct {
	// Backend runs the servers. Required.
	Backend Backend
	// WorkerCommand returns the command that starts one worker process:
	// quorumlock-chaos's hidden worker mode, or a re-executed test
	// binary. The runner sets its environment and pipes.
	WorkerCommand func() (*exec.Cmd, error)
	// Progress receives a progress line while the suite runs; nil: none.
	Progress io.Writer
	// Log receives one line per finished run; nil: none.
	Log io.Writer
	// History, when set, is a directory that receives each run's section
	// history as CSV (one row per critical section, times in ns of the machine's monotonic clock), for
	// checking the verdicts by hand.
	History string
}

// runSeed derives a run's seed from the suite's seed and the run's name,
// so that a run keeps its seed when other runs are filtered out.
func runSeed(suite uint64, s Scenario) uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", suite, s.Name())
	return h.Sum64() >> 1 // fits a signed 64-bit integer, for JSON readers
}

// Run executes every run of p in order and returns the report. It stops
// early, with the runs finished so far, when ctx ends. An error means the
// suite could not run at all (for example PostgreSQL did not start); a run
// that failed its expectations is reported in the Result, not as an error.
func Run(ctx context.Context, p Profile, seed uint64, opts Options) (*Report, error) {
	if opts.Backend == nil || opts.WorkerCommand == nil {
		return nil, errors.New("chaos: Run needs a backend and a worker command")
	}
	rep := &Report{Profile: p.Name, Backend: opts.Backend.Name(), Seed: seed, Started: time.Now().UTC()}
	pg, err := opts.Backend.Postgres(ctx)
	if err != nil {
		return nil, err
	}
	bar := newProgress(opts.Progress, p)
	defer bar.finish()
	for i, sc := range p.Runs {
		if ctx.Err() != nil {
			break
		}
		rs := runSeed(seed, sc)
		bar.start(i, sc)
		r := runOne(ctx, opts, pg, sc, rs, bar)
		if ctx.Err() != nil && !r.Pass {
			break // interrupted: the half-run is not a result
		}
		rep.Runs = append(rep.Runs, r)
		bar.end(i, sc)
		if opts.Log != nil {
			verdict := "ok"
			if !r.Pass {
				verdict = "FAIL: " + strings.Join(r.Failure, "; ")
			}
			bar.clear()
			ledger := ""
			if x := r.Transfers; x != nil {
				ledger = fmt.Sprintf("transfers=%d lost_transfers=%d doubled=%d accounts_off=%d drift=%d ", x.Committed, x.Lost, x.Doubled, x.Mismatched, x.Drift)
			}
			fmt.Fprintf(opts.Log, "%-15s %-28s %-12s seed=%-20d sections=%-5d lost=%-4d overlaps=%-3d rejected=%-4d %s%s\n",
				r.Topology, r.Fault, r.Fencing, r.Seed, r.Sections, r.LostUpdates, r.Overlaps, r.Rejected, ledger, verdict)
		}
	}
	rep.Comparisons = compare(rep.Runs)
	rep.DurationMs = time.Since(rep.Started).Milliseconds()
	return rep, ctx.Err()
}

// env is one run as its fault's hooks see it: the scenario and what it
// resolved to, the run's seeded randomness, and the three parts a fault
// acts on.
type env struct {
	sc      Scenario
	backend Backend // where the servers run, for a fault that starts one
	seed    uint64
	rng     *rand.Rand
	topo    *topology
	fault   *fault
	cluster *cluster // the lock servers and the links to them
	pg      Postgres // the suite's database, where the counter lives
	crew    *crew    // the worker processes
	cfgs    []workerConfig
	log     *faultLog // what the fault did, for the report
}

func runOne(ctx context.Context, opts Options, pg Postgres, sc Scenario, seed uint64, bar *progress) Result {
	start := time.Now()
	r := Result{Topology: sc.Topology, Fault: sc.Fault, Fencing: sc.Fencing, Seed: seed, Repeat: sc.Repeat,
		Workers: sc.Workers, TTLms: sc.TTL.Milliseconds(), WorkMs: sc.Work.Milliseconds(), StallRate: sc.StallRate,
		PollMs: sc.Poll.Milliseconds(), Quarantine: sc.Quarantine(), Style: sc.Style}
	err := execute(ctx, opts, pg, sc, seed, bar, &r)
	r.DurationMs = time.Since(start).Milliseconds()
	r.evaluate(sc.Expect, err)
	return r
}

// resolve finds the topology and fault sc names, and checks they go
// together, before anything starts.
func resolve(sc Scenario) (*topology, *fault, error) {
	t := lookupTopology(sc.Topology)
	if t == nil {
		return nil, nil, fmt.Errorf("chaos: unknown topology %q", sc.Topology)
	}
	f := lookupFault(sc.Fault)
	if f == nil {
		return nil, nil, fmt.Errorf("chaos: unknown fault %q", sc.Fault)
	}
	if !f.appliesTo(t.name) {
		return nil, nil, fmt.Errorf("chaos: fault %s does not apply to topology %s", f.name, t.name)
	}
	return t, f, nil
}

// execute runs sc in a fresh database and scores it into r: start the
// topology, warm it up, prepare the fault, run the workers with the
// fault's script beside them, then read the history and score it.
func execute(ctx context.Context, opts Options, pg Postgres, sc Scenario, seed uint64, bar *progress, r *Result) (err error) {
	t, f, err := resolve(sc)
	if err != nil {
		return err
	}
	db := fmt.Sprintf("chaos_%d", seed%1_000_000_007)
	_ = pg.DropDatabase(ctx, db)
	if err := pg.CreateDatabase(ctx, db); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, pg.DropDatabase(dctx, db))
	}()
	dsn := pg.DSN(db)
	if err := setupSchema(ctx, dsn); err != nil {
		return err
	}
	e := &env{sc: sc, backend: opts.Backend, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), topo: t, fault: f,
		cluster: &cluster{}, pg: pg, crew: &crew{}, log: &faultLog{}}
	defer func() {
		e.crew.stop()
		e.cluster.stop()
	}()
	if err := e.cluster.start(ctx, opts.Backend, t, f, sc.Workers); err != nil {
		return err
	}
	if err := e.cluster.warmup(ctx, t, sc); err != nil {
		return fmt.Errorf("chaos: the topology does not grant a lock before any fault: %w", err)
	}
	if f.prepare != nil {
		if err := f.prepare(ctx, e); err != nil {
			return err
		}
	}
	e.cfgs = make([]workerConfig, sc.Workers)
	for w := range e.cfgs {
		e.cfgs[w] = newWorkerConfig(e, dsn, w)
	}
	cfgs := e.cfgs
	if err := e.crew.start(opts.WorkerCommand, cfgs); err != nil {
		return err
	}

	sctx, cancel := context.WithCancel(ctx)
	scriptErr := make(chan error, 1)
	go func() {
		if f.script == nil {
			scriptErr <- nil
			return
		}
		scriptErr <- f.script(sctx, e)
	}()
	werr := e.crew.wait(ctx, bar)
	cancel()
	serr := <-scriptErr
	if errors.Is(serr, context.Canceled) && ctx.Err() == nil {
		serr = nil
	}
	e.log.close()
	if err := errors.Join(werr, serr); err != nil {
		return err
	}
	h, err := readHistory(ctx, dsn)
	if err != nil {
		return err
	}
	if opts.History != "" {
		if err := writeHistory(opts.History, sc, seed, h.sections); err != nil {
			return err
		}
	}
	r.score(h, e.log.record(), e.crew.stats())
	if sc.Style == styleTransfers {
		l, err := readLedger(ctx, dsn)
		if err != nil {
			return err
		}
		r.scoreTransfers(h, l)
	}
	if f.judge != nil {
		r.judged = f.judge(e, r, h, e.crew.stats())
	}
	return nil
}
