package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// WorkerEnv is the environment variable that carries a worker's
// configuration (JSON) from the coordinator to the worker process.
const WorkerEnv = "QUORUMLOCK_CHAOS_WORKER"

// WorkerConfig is everything a worker process needs. Durations are in
// milliseconds so the JSON stays readable.
type WorkerConfig struct {
	ID        int      `json:"id"`
	Nodes     []string `json:"nodes"` // the nodes' own addresses: their identity for redlock
	Dial      []string `json:"dial"`  // what to dial for each node: this worker's proxies
	DSN       string   `json:"dsn"`
	Key       string   `json:"key"`
	Fencing   string   `json:"fencing"`
	TTLms     int      `json:"ttl_ms"`
	WorkMs    int      `json:"work_ms"`
	NodeMs    int      `json:"node_timeout_ms"`
	LockMs    int      `json:"lock_wait_ms"`
	Sections  int      `json:"sections"`
	MaxFail   int      `json:"max_failures"` // consecutive failed Lock calls that end the worker (0: never)
	NoQuar    bool     `json:"no_quarantine"`
	StallRate float64  `json:"stall_rate"`
	StallMin  int      `json:"stall_min_ms"`
	StallMax  int      `json:"stall_max_ms"`
	HoldMs    int      `json:"hold_cap_ms"` // > 0: sections run under Do, extended up to this long
	PollMs    int      `json:"poll_ms"`     // > 0: poll TryLock this often instead of waiting in Lock
	Seed      uint64   `json:"seed"`
	Gates     []Gate   `json:"gates"`      // wait for the coordinator there
	GateUntil int      `json:"gate_until"` // gates apply to attempts numbered below this
	BudgetMs  int      `json:"budget_ms"`  // stop after this long (0: no limit)
}

// WorkerStats is the worker's last line on stdout.
type WorkerStats struct {
	Accepted  int    `json:"accepted"`
	Rejected  int    `json:"rejected"`
	Failures  int    `json:"lock_failures"`
	Polls     int    `json:"polls,omitempty"` // TryLock refusals a polling worker slept after
	Errors    int    `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// A worker talks to the coordinator in the protocol of protocol.go, and
// records every critical section in the sections table.

// RunWorker runs one worker process: it takes the lock, reads the counter,
// works, writes the counter plus one, and records the section, until it
// has Sections accepted increments, its budget ends, or ctx ends. It
// returns an error only when it could not start.
func RunWorker(ctx context.Context, cfg WorkerConfig, stdin io.Reader, stdout io.Writer) error {
	if len(cfg.Nodes) == 0 || len(cfg.Nodes) != len(cfg.Dial) {
		return errors.New("chaos worker: nodes and dial addresses do not match")
	}
	if _, ok := fencingModes[cfg.Fencing]; !ok {
		return fmt.Errorf("chaos worker: unknown fencing mode %q", cfg.Fencing)
	}
	if cfg.BudgetMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.BudgetMs)*time.Millisecond)
		defer cancel()
	}
	w := &worker{cfg: cfg, in: bufio.NewScanner(stdin), out: stdout,
		rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)))}
	ttl := time.Duration(cfg.TTLms) * time.Millisecond

	clients := make([]redis.UniversalClient, len(cfg.Nodes))
	for i := range cfg.Nodes {
		dial := cfg.Dial[i]
		clients[i] = redis.NewClient(&redis.Options{
			Addr: cfg.Nodes[i],
			Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, dial)
			},
			ContextTimeoutEnabled: true,
			MaxRetries:            -1,
			DialTimeout:           500 * time.Millisecond,
			ReadTimeout:           time.Second,
			WriteTimeout:          time.Second,
			PoolSize:              4,
			PoolTimeout:           time.Second,
		})
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	opts := []redlock.Option{redlock.WithMaxTTL(ttl)}
	if cfg.Fencing != "none" {
		opts = append(opts, redlock.WithFencing())
	}
	if cfg.NodeMs > 0 {
		opts = append(opts, redlock.WithNodeTimeout(time.Duration(cfg.NodeMs)*time.Millisecond))
	}
	if cfg.NoQuar {
		opts = append(opts, redlock.WithoutRestartQuarantine())
	}
	if cfg.HoldMs > 0 {
		opts = append(opts, redlock.WithMaxHold(time.Duration(cfg.HoldMs)*time.Millisecond))
	}
	lc, err := redlock.New(clients, opts...)
	if err != nil {
		return fmt.Errorf("chaos worker: %w", err)
	}
	defer lc.Close()

	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return fmt.Errorf("chaos worker: %w", err)
	}
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fmt.Errorf("chaos worker: %w", err)
	}
	defer pool.Close()
	w.pool = pool
	if w.guard, err = fencing.NewGuard(fencing.GuardConfig{Table: "counter", KeyColumn: "id", FenceColumn: "fence"}); err != nil {
		return err
	}
	if w.ft, err = fencing.NewFenceTable(fencing.FenceTableConfig{Table: fencing.DefaultFenceTable}); err != nil {
		return err
	}

	var st WorkerStats
	consecutive := 0
	for attempt := 0; st.Accepted < cfg.Sections && ctx.Err() == nil; attempt++ {
		if err := w.gate(ctx, GateStart, attempt, 0); err != nil {
			break
		}
		var s section
		s.attempt = attempt
		s.callNs = wallNs()
		lctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.LockMs)*time.Millisecond)
		var outcome Outcome
		var err error
		if cfg.HoldMs > 0 {
			// Renewal: the lease is kept extended while the section runs,
			// up to the hold cap.
			// The section ignores the context Do cancels when the lease
			// ends: a hung worker does not look at it either.
			var serr error
			err = lc.Do(lctx, cfg.Key, ttl, func(_ context.Context, lease *redlock.Lease) error {
				outcome, serr = w.section(ctx, lease, &s)
				return serr
			})
			s.releaseNs = wallNs()
			if outcome != outcomeNotLocked {
				err = serr // a lost lease is what the scenario is about, not an error
			}
		} else {
			var lease *redlock.Lease
			if lease, err = w.lock(lctx, lc, ttl); err == nil {
				outcome, err = w.section(ctx, lease, &s)
				_ = lease.Release(context.WithoutCancel(ctx))
				s.releaseNs = wallNs()
			}
		}
		cancel()
		if outcome == outcomeNotLocked {
			if ctx.Err() != nil {
				break
			}
			st.Failures++
			st.LastError = oneLine(err)
			consecutive++
			if cfg.MaxFail > 0 && consecutive >= cfg.MaxFail {
				break
			}
			continue
		}
		consecutive = 0
		if outcome == outcomeStopped {
			break
		}
		s.outcome = outcome
		switch outcome {
		case OutcomeOK:
			st.Accepted++
		case OutcomeRejected:
			st.Rejected++
		default:
			st.Errors++
			if err != nil {
				st.LastError = oneLine(err)
			}
		}
		if err := w.record(context.WithoutCancel(ctx), &s); err != nil {
			st.Errors++
			st.LastError = oneLine(err)
		}
		writeDone(w.out, st.Accepted)
	}
	st.Polls = w.polls
	writeStats(w.out, st)
	return nil
}

// lock takes the lock with Lock, or, when the worker polls, with TryLock
// and a fixed sleep after each refusal, as a client without release
// notices or a view of the holder's expiry does.
func (w *worker) lock(ctx context.Context, lc *redlock.Client, ttl time.Duration) (*redlock.Lease, error) {
	if w.cfg.PollMs <= 0 {
		return lc.Lock(ctx, w.cfg.Key, ttl)
	}
	for {
		lease, err := lc.TryLock(ctx, w.cfg.Key, ttl)
		if err == nil || !errors.Is(err, redlock.ErrNotObtained) {
			return lease, err
		}
		w.polls++
		t := time.NewTimer(time.Duration(w.cfg.PollMs) * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		}
	}
}

// section is one critical section on lease: the "locked" gate, then the
// body. Its deadline is read at the end, so that extensions count.
func (w *worker) section(ctx context.Context, lease *redlock.Lease, s *section) (Outcome, error) {
	s.gotNs = wallNs()
	s.token = lease.FencingToken()
	if err := w.gate(ctx, GateLocked, s.attempt, s.token); err != nil {
		return outcomeStopped, err
	}
	outcome, err := w.body(ctx, lease, s)
	s.endNs = wallNs()
	s.deadlineNs = s.endNs + int64(time.Until(lease.Deadline()))
	return outcome, err
}

var fencingModes = map[string]bool{"none": true, "write-only": true, "claim-first": true, "fence-table": true}

type worker struct {
	cfg   WorkerConfig
	in    *bufio.Scanner
	out   io.Writer
	rng   *rand.Rand
	pool  *pgxpool.Pool
	guard *fencing.Guard
	ft    *fencing.FenceTable
	polls int // TryLock refusals slept after (polling workers)
}

type section struct {
	attempt                          int
	token                            uint64
	callNs, gotNs, deadlineNs, endNs int64
	releaseNs                        int64
	readNs, read                     int64
	outcome                          Outcome
}

func wallNs() int64 { return time.Now().UnixNano() }

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// gate waits for the coordinator when gate g is on for attempt.
func (w *worker) gate(ctx context.Context, g Gate, attempt int, token uint64) error {
	if attempt >= w.cfg.GateUntil {
		return nil
	}
	for _, on := range w.cfg.Gates {
		if on == g {
			writeGate(w.out, gateEvent{gate: g, attempt: attempt, token: token})
			if !w.in.Scan() {
				return errors.New("coordinator closed stdin")
			}
			return ctx.Err()
		}
	}
	return nil
}

// work is the time spent between read and write: the configured work,
// and now and then a stall.
func (w *worker) work(ctx context.Context) {
	d := time.Duration(w.cfg.WorkMs) * time.Millisecond
	if w.cfg.StallRate > 0 && w.rng.Float64() < w.cfg.StallRate {
		lo, hi := w.cfg.StallMin, w.cfg.StallMax
		ms := lo
		if hi > lo {
			ms += w.rng.IntN(hi - lo + 1)
		}
		d += time.Duration(ms) * time.Millisecond
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// readCounter reads the counter into s, noting when the read was sent.
func readCounter(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, s *section) error {
	s.readNs = wallNs()
	return q.QueryRow(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&s.read)
}

// body is one critical section in the worker's fencing mode. The database
// calls deliberately carry no deadline from the lease: the point is to see
// what a holder that outlived its lease does to the data.
func (w *worker) body(ctx context.Context, lease *redlock.Lease, s *section) (Outcome, error) {
	tok := int64(lease.FencingToken())
	switch w.cfg.Fencing {
	case "none":
		if err := readCounter(ctx, w.pool, s); err != nil {
			return OutcomeError, err
		}
		if err := w.gate(ctx, GateRead, s.attempt, s.token); err != nil {
			return OutcomeError, err
		}
		w.work(ctx)
		if _, err := w.pool.Exec(ctx, `UPDATE counter SET value = $1, last_token = $2 WHERE id = 1`, s.read+1, tok); err != nil {
			return OutcomeError, err
		}
		return OutcomeOK, nil
	case "write-only":
		if err := readCounter(ctx, w.pool, s); err != nil {
			return OutcomeError, err
		}
		if err := w.gate(ctx, GateRead, s.attempt, s.token); err != nil {
			return OutcomeError, err
		}
		w.work(ctx)
		return verdictOf(w.guard.Write(ctx, w.pool, 1, lease, fencing.Values{"value": s.read + 1, "last_token": tok}))
	case "claim-first":
		if err := w.guard.Claim(ctx, w.pool, 1, lease); err != nil {
			return verdictOf(err)
		}
		if err := readCounter(ctx, w.pool, s); err != nil {
			return OutcomeError, err
		}
		if err := w.gate(ctx, GateRead, s.attempt, s.token); err != nil {
			return OutcomeError, err
		}
		w.work(ctx)
		return verdictOf(w.guard.WriteClaimed(ctx, w.pool, 1, lease, fencing.Values{"value": s.read + 1, "last_token": tok}))
	default: // fence-table
		return verdictOf(w.ft.InTx(ctx, w.pool, "counter", lease, func(ctx context.Context, tx pgx.Tx) error {
			if err := readCounter(ctx, tx, s); err != nil {
				return err
			}
			if err := w.gate(ctx, GateRead, s.attempt, s.token); err != nil {
				return err
			}
			w.work(ctx)
			_, err := tx.Exec(ctx, `UPDATE counter SET value = $1, last_token = $2 WHERE id = 1`, s.read+1, tok)
			return err
		}))
	}
}

func verdictOf(err error) (Outcome, error) {
	switch {
	case err == nil:
		return OutcomeOK, nil
	case errors.Is(err, fencing.ErrStaleToken):
		return OutcomeRejected, err
	default:
		return OutcomeError, err
	}
}

func (w *worker) record(ctx context.Context, s *section) error {
	_, err := w.pool.Exec(ctx, `INSERT INTO sections
		(worker, attempt, token, call_ns, got_ns, deadline_ns, end_ns, release_ns, read_ns, read_val, outcome)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		w.cfg.ID, s.attempt, int64(s.token), s.callNs, s.gotNs, s.deadlineNs, s.endNs, s.releaseNs, s.readNs, s.read, s.outcome.String())
	return err
}

// schema is created in every run's fresh database.
const schema = `
CREATE TABLE counter (
	id int PRIMARY KEY,
	value bigint NOT NULL,
	last_token bigint NOT NULL DEFAULT 0,
	fence bigint NOT NULL DEFAULT 0);
INSERT INTO counter (id, value) VALUES (1, 0);
CREATE TABLE sections (
	worker int NOT NULL, attempt int NOT NULL, token bigint NOT NULL,
	call_ns bigint NOT NULL, got_ns bigint NOT NULL, deadline_ns bigint NOT NULL,
	end_ns bigint NOT NULL, release_ns bigint NOT NULL,
	read_ns bigint NOT NULL, read_val bigint NOT NULL, outcome text NOT NULL);
-- Every change of the counter, in commit order of the row (the row lock
-- orders them), with the token of the writer.
CREATE TABLE writes (seq bigserial PRIMARY KEY, token bigint NOT NULL, value bigint NOT NULL);
CREATE FUNCTION log_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.value IS DISTINCT FROM OLD.value THEN
		INSERT INTO writes (token, value) VALUES (NEW.last_token, NEW.value);
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER counter_writes AFTER UPDATE ON counter FOR EACH ROW EXECUTE FUNCTION log_write();
`

// WorkerMain runs a worker process from the configuration in WorkerEnv and
// returns its exit status. The quorumlock binary's hidden chaos-worker
// command and the package's tests (which re-execute their own binary) both
// call it.
func WorkerMain(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		fmt.Fprintf(stderr, "chaos worker: %s is not set; workers are started by the chaos suite\n", WorkerEnv)
		return 2
	}
	var cfg WorkerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(stderr, "chaos worker: bad configuration: %v\n", err)
		return 2
	}
	if err := RunWorker(ctx, cfg, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
