package chaos

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(&fault{
		name:       "db-restart",
		rank:       115,
		doc:        "kill -9 of the PostgreSQL server that holds the lock and the counter, restarted after a second",
		topologies: []string{PgAdvisory, PgRow},
		runs: map[string][]Scenario{
			"quick": {newRun(PgAdvisory, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero, Ungranted: true}),
				newRun(PgRow, "none", 4, 40, Expect{Overlaps: Zero, Lost: Zero, Ungranted: true})},
		},
		script: restartDatabase,
	})
}

// dbDown is how long the database stays down.
const dbDown = time.Second

// restartDatabase kills the suite's PostgreSQL after warm-up and starts it
// again after dbDown. The fault's window runs from the moment the server
// is gone to the moment it is started again: a section granted in it
// would be a lock the database granted while it was down.
func restartDatabase(ctx context.Context, e *env) error {
	pg, ok := e.pg.(interface {
		Kill() error
		Restart(context.Context) error
	})
	if !ok {
		return fmt.Errorf("chaos: this backend's PostgreSQL cannot be killed and restarted")
	}
	if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
		return err
	}
	before := e.crew.done()
	if err := pg.Kill(); err != nil {
		return err
	}
	t0 := time.Now()
	e.log.mark(true)
	_ = sleep(ctx, dbDown)
	// The window closes as the server is started again: from then on it
	// may grant locks as soon as it accepts connections.
	e.log.mark(false)
	down := time.Since(t0)
	// Restart even when the run is being cancelled: later runs need the
	// database.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := pg.Restart(rctx); err != nil {
		return err
	}
	e.log.note("PostgreSQL killed after %d sections, down for %v, accepting connections again %v after the kill",
		before, down.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	return nil
}
