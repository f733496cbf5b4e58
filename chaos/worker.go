package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// A worker talks to the coordinator in the protocol of protocol.go, and
// records every critical section in the sections table.

// runWorker runs one worker process: it takes the lock, reads the counter,
// works, writes the counter plus one, and records the section, until it
// has Sections accepted increments, its budget ends, or ctx ends. It
// returns an error only when it could not start.
func runWorker(ctx context.Context, cfg workerConfig, stdin io.Reader, stdout io.Writer) error {
	if !slices.Contains(fencingModes, cfg.Fencing) {
		return fmt.Errorf("chaos worker: unknown fencing mode %q", cfg.Fencing)
	}
	if cfg.BudgetMs > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(cfg.BudgetMs)*time.Millisecond)
		defer cancel()
	}
	w := &worker{cfg: cfg, in: bufio.NewScanner(stdin), out: stdout,
		rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)))}
	svc, err := newLockService(cfg)
	if err != nil {
		return err
	}
	defer svc.close()

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
	if w.accounts, err = fencing.NewGuard(fencing.GuardConfig{Table: "accounts", KeyColumn: "id", FenceColumn: "fence"}); err != nil {
		return err
	}

	var st workerStats
	consecutive := 0
	for attempt := 0; st.Accepted < cfg.Sections && ctx.Err() == nil && !w.over(); attempt++ {
		if err := w.gate(ctx, gateStart, attempt, 0); err != nil {
			break
		}
		s := section{attempt: attempt, callNs: stampNs()}
		outcome, err := svc.attempt(ctx, w, &s)
		if s.panicked {
			st.Panics++
		}
		if outcome == outcomeNotLocked {
			if ctx.Err() != nil || w.over() {
				break
			}
			st.Failures++
			st.LastError = oneLine(err)
			if refused(err) {
				st.Refused++
				if st.RefusedError == "" {
					st.RefusedError = oneLine(err)
				}
				_ = sleep(ctx, time.Duration(cfg.PauseMs)*time.Millisecond)
			}
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
		if st.Panics > 0 && !s.panicked {
			st.AfterPanic++
		}
		s.outcome = outcome
		switch outcome {
		case outcomeOK:
			st.Accepted++
		case outcomeRejected:
			st.Rejected++
		default:
			st.Errors++
			if err != nil {
				st.LastError, st.SectionError = oneLine(err), oneLine(err)
			}
		}
		if svc.recordsItself() {
			// The section's row went in with its write, or not at all.
		} else if err := w.record(context.WithoutCancel(ctx), w.pool, &s); err != nil {
			st.Errors++
			st.LastError, st.SectionError = oneLine(err), "record the section: "+oneLine(err)
		}
		writeDone(w.out, st.Accepted)
	}
	st.Polls = w.polls
	st.Extends, st.ExtendErrors = w.extends, w.extendErrs
	st.Bootstraps, st.BootstrapErr = w.bootstraps, w.bootstrapErrs
	writeStats(w.out, st)
	return nil
}

// lockService is the lock a worker takes, of its topology's kind: it
// takes the lock, runs one section under it (w.section, or its own where
// the lock lives in the section's transaction) and lets it go.
type lockService interface {
	// attempt returns outcomeNotLocked, with the reason, when it did not
	// get the lock.
	attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error)
	// recordsItself reports whether attempt writes the section's row
	// itself, in the section's own transaction.
	recordsItself() bool
	close()
}

// newLockService builds the worker's lock client for cfg.Lock.
func newLockService(cfg workerConfig) (lockService, error) {
	switch cfg.Lock {
	case "", lockRedlock:
		return newRedlockService(cfg)
	case lockAdvisory:
		return newAdvisoryService(cfg)
	case lockEtcd:
		return newEtcdService(cfg)
	case lockRow:
		return newRowService(cfg)
	case lockZK:
		return newZKService(cfg)
	}
	return nil, fmt.Errorf("chaos worker: unknown lock %q", cfg.Lock)
}

type worker struct {
	cfg   workerConfig
	in    *bufio.Scanner
	out   io.Writer
	rng   *rand.Rand
	pool  *pgxpool.Pool
	guard *fencing.Guard
	ft    *fencing.FenceTable
	polls int // TryLock refusals slept after (polling workers)

	accounts *fencing.Guard // the transfers style's accounts, by id
	pending  *transfer      // the transfer to make next (one fencing refused is made again)
	made     int            // transfers this worker started, for their ids

	extends, extendErrs       int // Extend calls from inside fn, and failed ones
	bootstraps, bootstrapErrs int // Bootstrap calls (workerConfig.Bootstrap), and refused ones
}

// over reports whether the worker's time (UntilNs) is up.
func (w *worker) over() bool { return w.cfg.UntilNs > 0 && stampNs() >= w.cfg.UntilNs }

// refused reports whether a lock call was refused because the client's
// configuration is wrong: settings that disagree with the deployment's (a
// *redlock.ConfigError) or one server listed twice (a
// *redlock.DuplicateNodeError); both match redlock.ErrConfigMismatch.
func refused(err error) bool {
	return errors.Is(err, redlock.ErrConfigMismatch)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// WorkerMain runs a worker process from the configuration in WorkerEnv and
// returns its exit status. quorumlock-chaos's hidden worker mode and the
// package's tests (which re-execute their own binary) both call it.
func WorkerMain(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) int {
	raw := os.Getenv(WorkerEnv)
	if raw == "" {
		fmt.Fprintf(stderr, "chaos worker: %s is not set; workers are started by the chaos suite\n", WorkerEnv)
		return 2
	}
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(stderr, "chaos worker: bad configuration: %v\n", err)
		return 2
	}
	if err := runWorker(ctx, cfg, stdin, stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
