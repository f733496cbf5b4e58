package chaos

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// Options configures a suite run.
type Options struct {
	// Backend runs the servers. Required.
	Backend Backend
	// WorkerCommand returns the command that starts one worker process:
	// the quorumlock binary's hidden chaos-worker mode, or a re-executed
	// test binary. The runner sets its environment and pipes.
	WorkerCommand func() (*exec.Cmd, error)
	// Progress receives a progress line while the suite runs; nil: none.
	Progress io.Writer
	// Log receives one line per finished run; nil: none.
	Log io.Writer
	// History, when set, is a directory that receives each run's section
	// history as CSV (one row per critical section, times in Unix ns), for
	// checking the verdicts by hand.
	History string
}

// RunSeed derives a run's seed from the suite's seed and the run's name,
// so that a run keeps its seed when other runs are filtered out.
func RunSeed(suite uint64, s Scenario) uint64 {
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
		rs := RunSeed(seed, sc)
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
			fmt.Fprintf(opts.Log, "%-15s %-28s %-12s seed=%-20d sections=%-5d lost=%-4d overlaps=%-3d rejected=%-4d %s\n",
				r.Topology, r.Fault, r.Fencing, r.Seed, r.Sections, r.LostUpdates, r.Overlaps, r.Rejected, verdict)
		}
	}
	rep.Comparisons = compare(rep.Runs)
	rep.DurationMs = time.Since(rep.Started).Milliseconds()
	return rep, ctx.Err()
}

// env is the state of one run.
type env struct {
	opts  Options
	sc    Scenario
	seed  uint64
	rng   *rand.Rand
	nodes []RedisNode // redlock-5: five; single: one; single+replica: primary, replica
	lockN int         // nodes in the lock: 5 or 1
	prox  [][]*Proxy  // [worker][lock node]
	repl  *Proxy      // single+replica: the replication link
	procs []*proc
	dsn   string
	bar   *progress

	mu        sync.Mutex
	faultFrom int64
	faultTo   int64
	errText   string
	errLat    time.Duration
	blocked   time.Duration
	schedule  []string
}

const counterKey = "chaos:counter"

func runOne(ctx context.Context, opts Options, pg Postgres, sc Scenario, seed uint64, bar *progress) Result {
	start := time.Now()
	r := Result{Topology: sc.Topology, Fault: sc.Fault, Fencing: sc.Fencing, Seed: seed, Repeat: sc.Repeat,
		Workers: sc.Workers, TTLms: sc.TTL.Milliseconds(), WorkMs: sc.Work.Milliseconds(), StallRate: sc.StallRate,
		PollMs: sc.Poll.Milliseconds(), Quarantine: sc.Quarantine()}
	e := &env{opts: opts, sc: sc, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), bar: bar}
	err := e.run(ctx, pg, &r)
	r.DurationMs = time.Since(start).Milliseconds()
	r.evaluate(sc.Expect, err)
	return r
}

func (e *env) run(ctx context.Context, pg Postgres, r *Result) (err error) {
	db := fmt.Sprintf("chaos_%d", e.seed%1_000_000_007)
	_ = pg.DropDatabase(ctx, db)
	if err := pg.CreateDatabase(ctx, db); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		err = errors.Join(err, pg.DropDatabase(dctx, db))
	}()
	e.dsn = pg.DSN(db)
	if err := e.setupSchema(ctx); err != nil {
		return err
	}
	defer e.teardown()
	if err := e.startTopology(ctx); err != nil {
		return err
	}
	if err := e.warmup(ctx); err != nil {
		return fmt.Errorf("chaos: the topology does not grant a lock before any fault: %w", err)
	}
	if e.sc.Fault == "kill-3" {
		if err := e.killThree(ctx); err != nil {
			return err
		}
	}
	if err := e.prepare(); err != nil {
		return err
	}
	if err := e.startWorkers(); err != nil {
		return err
	}

	sctx, cancel := context.WithCancel(ctx)
	scriptErr := make(chan error, 1)
	go func() { scriptErr <- e.script(sctx) }()
	werr := e.waitWorkers(ctx)
	cancel()
	serr := <-scriptErr
	if errors.Is(serr, context.Canceled) && ctx.Err() == nil {
		serr = nil
	}
	e.mu.Lock()
	if e.faultFrom != 0 && e.faultTo == 0 {
		e.faultTo = time.Now().UnixNano()
	}
	e.mu.Unlock()
	if err := errors.Join(werr, serr); err != nil {
		return err
	}
	return e.collect(ctx, r)
}

func (e *env) setupSchema(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return fmt.Errorf("chaos: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, schema); err != nil {
		return fmt.Errorf("chaos: create schema: %w", err)
	}
	ft, err := fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable})
	if err != nil {
		return err
	}
	return ft.Setup(ctx, conn)
}

func (e *env) startTopology(ctx context.Context) error {
	var specs []RedisSpec
	switch e.sc.Topology {
	case Redlock5:
		specs = make([]RedisSpec, 5)
		e.lockN = 5
		switch e.sc.Fault {
		case "restart-aof":
			specs[2].AOF = true
		case "clock-jump":
			specs[2].Clock = true
		}
	case Single:
		specs, e.lockN = []RedisSpec{{}}, 1
	case SingleReplica:
		specs, e.lockN = []RedisSpec{{}}, 1
	default:
		return fmt.Errorf("chaos: unknown topology %q", e.sc.Topology)
	}
	e.nodes = make([]RedisNode, len(specs))
	// The first failed start cancels the others; the backend stops the
	// nodes that did come up.
	g, gctx := errgroup.WithContext(ctx)
	for i := range specs {
		g.Go(func() (err error) {
			e.nodes[i], err = e.opts.Backend.StartRedis(gctx, specs[i])
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if e.sc.Topology == SingleReplica {
		// The replication link runs through a proxy, so the failover
		// fault can hold it back (a stopped replica process would not do:
		// its kernel keeps accepting the stream, and it applies the
		// buffered writes as soon as it runs again).
		rp, err := NewProxy(e.nodes[0].Addr())
		if err != nil {
			return err
		}
		e.repl = rp
		rep, err := e.opts.Backend.StartRedis(ctx, RedisSpec{ReplicaOf: rp.Addr()})
		if err != nil {
			return err
		}
		e.nodes = append(e.nodes, rep)
	}
	e.prox = make([][]*Proxy, e.sc.Workers)
	for w := range e.prox {
		for n := range e.lockN {
			p, err := NewProxy(e.nodes[n].Addr())
			if err != nil {
				return err
			}
			e.prox[w] = append(e.prox[w], p)
		}
	}
	return nil
}

func (e *env) teardown() {
	for _, p := range e.procs {
		p.stop()
	}
	if e.repl != nil {
		_ = e.repl.Close()
	}
	for _, ps := range e.prox {
		for _, p := range ps {
			_ = p.Close()
		}
	}
	for _, n := range e.nodes {
		if n != nil {
			_ = n.Stop()
		}
	}
}

// directClients connects to the lock nodes without proxies.
func (e *env) directClients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, e.lockN)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{Addr: e.nodes[i].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	}
	return cs
}

func closeAll(cs []redis.UniversalClient) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// warmup takes and releases a lock once, so the nodes are admitted as a
// deployment before any fault (a brand-new node is admitted only when a
// majority of its peers answer), and, with a replica, waits until the
// replica has every write.
func (e *env) warmup(ctx context.Context) error {
	cs := e.directClients()
	defer closeAll(cs)
	opts := []redlock.Option{redlock.WithMaxTTL(e.sc.TTL), redlock.WithNodeTimeout(time.Second)}
	if !e.sc.Quarantine() {
		opts = append(opts, redlock.WithoutRestartQuarantine())
	}
	lc, err := redlock.New(cs, opts...)
	if err != nil {
		return err
	}
	defer lc.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := lc.Lock(wctx, "chaos:warmup", e.sc.TTL)
	if err != nil {
		return err
	}
	_ = l.Release(wctx)
	if e.sc.Topology == SingleReplica {
		// A replica that has just started may not be connected yet; WAIT
		// blocks until it has acknowledged every write so far.
		c := redis.NewClient(&redis.Options{Addr: e.nodes[0].Addr(), MaxRetries: -1, ReadTimeout: 15 * time.Second})
		defer c.Close()
		if n, err := c.Do(wctx, "WAIT", 1, 8000).Int64(); err != nil || n < 1 {
			return fmt.Errorf("chaos: the replica did not catch up (WAIT: %d, %v)", n, err)
		}
	}
	return nil
}

func (e *env) workerConfig(w int) WorkerConfig {
	sc := e.sc
	cfg := WorkerConfig{
		ID: w, DSN: e.dsn, Key: counterKey, Fencing: sc.Fencing,
		TTLms: int(sc.TTL.Milliseconds()), WorkMs: int(sc.Work.Milliseconds()),
		NodeMs: max(30, int(sc.TTL.Milliseconds()*15/100)), LockMs: 10_000,
		Sections: sc.Sections, NoQuar: !sc.Quarantine(),
		StallRate: sc.StallRate, StallMin: int(sc.StallMin.Milliseconds()), StallMax: int(sc.StallMax.Milliseconds()),
		Seed: e.seed, PollMs: int(sc.Poll.Milliseconds()),
	}
	if sc.Topology != Redlock5 {
		cfg.NodeMs = 100 // one node: a timeout only costs availability
	}
	for n := range e.lockN {
		cfg.Nodes = append(cfg.Nodes, e.nodes[n].Addr())
		cfg.Dial = append(cfg.Dial, e.prox[w][n].Addr())
	}
	per := sc.Work + 25*time.Millisecond + time.Duration(sc.StallRate*float64(sc.StallMax))
	cfg.BudgetMs = int(max(90*time.Second, 3*time.Duration(sc.Sections*sc.Workers)*per).Milliseconds())
	switch {
	case sc.Fault == "kill-3":
		cfg.LockMs, cfg.MaxFail = 400, 2
	case engineered(sc.Fault):
		if w == 0 {
			cfg.Gates = []string{"locked", "read"}
		} else {
			cfg.Gates = []string{"start"}
		}
		cfg.GateUntil = 1
	case sc.Fault == "worker-freeze":
		cfg.Gates, cfg.GateUntil = []string{"start"}, 1
		if w == 0 {
			cfg.Gates = []string{"read"}
		}
	case sc.Fault == "worker-crash":
		cfg.Gates, cfg.GateUntil = []string{"start"}, 1
		if w == 0 {
			cfg.Gates = []string{"locked"}
		}
	case sc.Fault == "renewal-hang":
		cfg.HoldMs = int(holdCap.Milliseconds())
		cfg.Gates, cfg.GateUntil = []string{"start"}, 1
		if w == 0 {
			cfg.Gates = []string{"read"}
		}
	case sc.Fault == "freeze-acquire" && w == 0:
		cfg.Gates, cfg.GateUntil = []string{"start"}, 1
	}
	return cfg
}

func (e *env) startWorkers() error {
	for w := range e.sc.Workers {
		p, err := startWorker(e.opts.WorkerCommand, e.workerConfig(w))
		if err != nil {
			return err
		}
		e.procs = append(e.procs, p)
	}
	return nil
}

// waitWorkers waits until every worker has exited, reporting progress.
func (e *env) waitWorkers(ctx context.Context) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, p := range e.procs {
		for {
			select {
			case <-p.exited:
			case <-tick.C:
				e.bar.update(e.totalDone())
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
			break
		}
	}
	for _, p := range e.procs {
		if st, killed := p.result(); st == nil && !killed {
			return fmt.Errorf("chaos: worker %d ended without a report: %s", p.id, p.errTail())
		}
	}
	return nil
}

func (e *env) totalDone() int64 {
	var n int64
	for _, p := range e.procs {
		n += p.done.Load()
	}
	return n
}

func (e *env) markFault(from bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if from {
		e.faultFrom = time.Now().UnixNano()
	} else {
		e.faultTo = time.Now().UnixNano()
	}
}

func (e *env) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.schedule = append(e.schedule, fmt.Sprintf(format, args...))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// warm waits until the workers together have n accepted sections.
func (e *env) warm(ctx context.Context, n int64) error {
	deadline := time.Now().Add(20 * time.Second)
	for e.totalDone() < n {
		if time.Now().After(deadline) {
			return fmt.Errorf("chaos: workers did only %d sections in 20s before the fault", e.totalDone())
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// collect reads the run's history from PostgreSQL and runs the checkers.
func (e *env) collect(ctx context.Context, r *Result) error {
	conn, err := pgx.Connect(ctx, e.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT worker, token, call_ns, got_ns, deadline_ns, end_ns, release_ns, read_ns, read_val, outcome FROM sections ORDER BY got_ns`)
	if err != nil {
		return err
	}
	var ss []Section
	for rows.Next() {
		var s Section
		var tok int64
		if err := rows.Scan(&s.Worker, &tok, &s.Call, &s.Got, &s.Deadline, &s.End, &s.Release, &s.ReadAt, &s.Read, &s.Outcome); err != nil {
			return err
		}
		s.Token = uint64(tok)
		ss = append(ss, s)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if err := conn.QueryRow(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&r.Final); err != nil {
		return err
	}
	var toks []uint64
	trows, err := conn.Query(ctx, `SELECT token FROM writes ORDER BY seq`)
	if err != nil {
		return err
	}
	for trows.Next() {
		var t int64
		if err := trows.Scan(&t); err != nil {
			return err
		}
		toks = append(toks, uint64(t))
	}
	if err := trows.Err(); err != nil {
		return err
	}

	if e.opts.History != "" {
		if err := writeHistory(e.opts.History, e.sc, e.seed, ss); err != nil {
			return err
		}
	}
	r.Sections = len(ss)
	e.mu.Lock()
	from, to := e.faultFrom, e.faultTo
	r.Error, r.ErrorLatencyMs, r.Schedule = e.errText, e.errLat.Milliseconds(), e.schedule
	r.BlockedMs = e.blocked.Milliseconds()
	e.mu.Unlock()
	var late []string
	for _, s := range ss {
		switch s.Outcome {
		case "ok":
			r.Accepted++
		case "rejected":
			r.Rejected++
		}
		if s.End > s.Deadline {
			r.LateSections++
			late = append(late, fmt.Sprintf("worker %d: section of %v on a lease valid for %v (lock call %v, token %d, %s)",
				s.Worker, ms(s.End-s.Got), ms(s.Deadline-s.Got), ms(s.Got-s.Call), s.Token, s.Outcome))
		}
		if from == 0 || (s.Got >= from && s.Got <= to) {
			r.DuringFault++
		}
	}
	if len(late) > 5 {
		late = append(late[:5], fmt.Sprintf("and %d more", len(late)-5))
	}
	r.Late = late
	r.Expected = int64(r.Accepted)
	r.LostUpdates = r.Expected - r.Final
	r.Overlaps = Overlaps(ss)
	r.StaleOverlaps = StaleOverlaps(ss)
	r.LateWrites, r.LateOverwritten = LateWrites(ss)
	r.ReadWriteShare = math.Round(ReadWriteShare(ss)*1000) / 1000
	r.TokenInversions = TokenInversions(toks)
	r.Linearizable = Linearizable(ss, 20*time.Second)
	for _, p := range e.procs {
		st, _ := p.result()
		if st == nil {
			continue
		}
		r.LockFailures += st.Failures
		r.Polls += st.Polls
		if r.Error == "" && st.LastError != "" && st.Accepted == 0 {
			r.Error = st.LastError
		}
	}
	return nil
}

func ms(ns int64) time.Duration { return time.Duration(ns).Round(time.Millisecond) }
