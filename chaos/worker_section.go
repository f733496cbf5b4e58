package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/quorumlock/quorumlock/fencing"
	"github.com/quorumlock/quorumlock/redlock"
)

// section is what a worker records about one critical section.
type section struct {
	attempt                          int
	token                            uint64
	callNs, gotNs, deadlineNs, endNs int64
	releaseNs                        int64
	heldNs                           int64 // the holder let go: Release called, or fn returned
	readNs, read                     int64
	outcome                          attemptOutcome
	panicked                         bool // fn panicked after the section (do-panic)

	// A transfer's section (the transfers style): its two accounts, the
	// token of the second one's key (token is the first's), and its id.
	row, row2 int
	token2    uint64
	transfer  string
}

// held is a lock a worker holds, as a section sees it: its fencing token
// (a fencing.Holder) and when it stops being valid.
type held interface {
	FencingToken() uint64
	Deadline() time.Time
}

var _ held = (*redlock.Lease)(nil)

// tokenHold is a held lock of a service that hands out a token and a
// lease but no object with both (etcd's Mutex on its session, ZooKeeper's
// lock znode on its session): the service's attempt computes them once,
// at the grant. Where the token comes from and why it grows with the
// order of grants is said where each service computes it.
type tokenHold struct {
	token    uint64
	deadline time.Time
}

func (h *tokenHold) FencingToken() uint64 { return h.token }
func (h *tokenHold) Deadline() time.Time  { return h.deadline }

// section is one critical section on lease: the "locked" gate, then the
// body. Its deadline is read at the end, so that extensions count.
func (w *worker) section(ctx context.Context, lease held, s *section) (attemptOutcome, error) {
	s.gotNs = stampNs()
	s.token = lease.FencingToken()
	deadline := s.gotNs + int64(time.Until(lease.Deadline()))
	if err := w.gateAt(ctx, gateEvent{gate: gateLocked, attempt: s.attempt, token: s.token, deadline: deadline}); err != nil {
		return outcomeStopped, err
	}
	outcome, err := w.body(ctx, lease, s)
	s.endNs = stampNs()
	s.deadlineNs = s.endNs + int64(time.Until(lease.Deadline()))
	return outcome, err
}

// gate waits for the coordinator when gate g is on for attempt.
func (w *worker) gate(ctx context.Context, g gatePoint, attempt int, token uint64) error {
	return w.gateAt(ctx, gateEvent{gate: g, attempt: attempt, token: token})
}

// gateAt is gate, telling the coordinator all of ev.
func (w *worker) gateAt(ctx context.Context, ev gateEvent) error {
	if ev.attempt >= w.cfg.GateUntil {
		return nil
	}
	for _, on := range w.cfg.Gates {
		if on == ev.gate {
			writeGate(w.out, ev)
			if !w.in.Scan() {
				return errors.New("coordinator closed stdin")
			}
			return ctx.Err()
		}
	}
	return nil
}

// work is the time spent between read and write: an Extend from inside
// fn in the do-extend style, then the configured work, and now and then a
// stall. An error means the lease could not be extended.
func (w *worker) work(ctx context.Context, lease held) error {
	if err := w.extend(ctx, lease); err != nil {
		return err
	}
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
	return nil
}

// readCounter reads the counter into s, noting when the read was sent.
func readCounter(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, row int, s *section) error {
	s.readNs = stampNs()
	return q.QueryRow(ctx, `SELECT value FROM counter WHERE id = $1`, row).Scan(&s.read)
}

// body is one critical section in the worker's fencing mode. The database
// calls deliberately carry no deadline from the lease: the point is to see
// what a holder that outlived its lease does to the data.
func (w *worker) body(ctx context.Context, lease held, s *section) (attemptOutcome, error) {
	tok := int64(lease.FencingToken())
	row := w.cfg.row()
	switch w.cfg.Fencing {
	case "none":
		if err := readCounter(ctx, w.pool, row, s); err != nil {
			return outcomeError, err
		}
		if err := w.gate(ctx, gateRead, s.attempt, s.token); err != nil {
			return outcomeError, err
		}
		if err := w.work(ctx, lease); err != nil {
			return outcomeError, err
		}
		if _, err := w.pool.Exec(ctx, `UPDATE counter SET value = $1, last_token = $2 WHERE id = $3`, s.read+1, tok, row); err != nil {
			return outcomeError, err
		}
		return outcomeOK, nil
	case "write-only":
		if err := readCounter(ctx, w.pool, row, s); err != nil {
			return outcomeError, err
		}
		if err := w.gate(ctx, gateRead, s.attempt, s.token); err != nil {
			return outcomeError, err
		}
		if err := w.work(ctx, lease); err != nil {
			return outcomeError, err
		}
		return verdictOf(w.guard.Write(ctx, w.pool, row, lease, fencing.Values{"value": s.read + 1, "last_token": tok}))
	case "claim-first":
		if err := w.guard.Claim(ctx, w.pool, row, lease); err != nil {
			return verdictOf(err)
		}
		if err := readCounter(ctx, w.pool, row, s); err != nil {
			return outcomeError, err
		}
		if err := w.gate(ctx, gateRead, s.attempt, s.token); err != nil {
			return outcomeError, err
		}
		if err := w.work(ctx, lease); err != nil {
			return outcomeError, err
		}
		return verdictOf(w.guard.WriteClaimed(ctx, w.pool, row, lease, fencing.Values{"value": s.read + 1, "last_token": tok}))
	default: // fence-table
		return verdictOf(w.ft.InTx(ctx, w.pool, "counter", lease, func(ctx context.Context, tx pgx.Tx) error {
			if err := readCounter(ctx, tx, row, s); err != nil {
				return err
			}
			if err := w.gate(ctx, gateRead, s.attempt, s.token); err != nil {
				return err
			}
			if err := w.work(ctx, lease); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE counter SET value = $1, last_token = $2 WHERE id = $3`, s.read+1, tok, row)
			return err
		}))
	}
}

func verdictOf(err error) (attemptOutcome, error) {
	switch {
	case err == nil:
		return outcomeOK, nil
	case errors.Is(err, fencing.ErrStaleToken):
		return outcomeRejected, err
	default:
		return outcomeError, err
	}
}

// record writes s to the sections table through db (the pool, or the
// section's own transaction).
func (w *worker) record(ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, s *section) error {
	row := w.cfg.row()
	if s.row != 0 {
		row = s.row
	}
	_, err := db.Exec(ctx, `INSERT INTO sections
		(worker, attempt, token, call_ns, got_ns, deadline_ns, end_ns, release_ns, read_ns, read_val, outcome, row_id, held_ns,
		 row2, token2, transfer)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)`,
		w.cfg.ID, s.attempt, int64(s.token), s.callNs, s.gotNs, s.deadlineNs, s.endNs, s.releaseNs, s.readNs, s.read, s.outcome.String(),
		row, s.heldNs, s.row2, int64(s.token2), s.transfer)
	return err
}
