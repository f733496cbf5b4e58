package chaos

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// history is what a run left in its database: every critical section the
// workers recorded, the counter's final value, and the tokens of the
// writes the counter accepted, in commit order.
type history struct {
	sections []check.Section // by the time the lock was granted
	final    int64           // row 1, the counter of the run's fencing mode
	tokens   []uint64        // of the writes to row 1
	final2   int64           // row 2, written without fencing (nemesis)
}

// readHistory reads a finished run's history from the database at dsn.
func readHistory(ctx context.Context, dsn string) (*history, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("chaos: read the history: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	h := &history{}
	rows, err := conn.Query(ctx, `SELECT worker, token, call_ns, got_ns, deadline_ns, end_ns, release_ns, read_ns, read_val, outcome, row_id, held_ns, row2, token2
		FROM sections ORDER BY got_ns`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var s check.Section
		var tok, tok2 int64
		var outcome string
		if err := rows.Scan(&s.Worker, &tok, &s.Call, &s.Got, &s.Deadline, &s.End, &s.Release, &s.ReadAt, &s.Read, &outcome, &s.Row, &s.Held, &s.Row2, &tok2); err != nil {
			return nil, err
		}
		s.Token, s.Token2 = uint64(tok), uint64(tok2)
		if s.Outcome, err = check.ParseOutcome(outcome); err != nil {
			return nil, fmt.Errorf("chaos: read the history: %w", err)
		}
		h.sections = append(h.sections, s)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT value FROM counter WHERE id = 1`).Scan(&h.final); err != nil {
		return nil, err
	}
	if err := conn.QueryRow(ctx, `SELECT value FROM counter WHERE id = 2`).Scan(&h.final2); err != nil {
		return nil, err
	}
	trows, err := conn.Query(ctx, `SELECT token FROM writes WHERE row_id = 1 ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	for trows.Next() {
		var t int64
		if err := trows.Scan(&t); err != nil {
			return nil, err
		}
		h.tokens = append(h.tokens, uint64(t))
	}
	if err := trows.Err(); err != nil {
		return nil, err
	}
	return h, nil
}
