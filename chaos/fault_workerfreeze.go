package chaos

import (
	"context"
	"fmt"
	"time"
)

func init() {
	register(&fault{
		name:       "worker-freeze",
		rank:       130,
		doc:        "SIGSTOP of the holder between read and write, past its lease",
		topologies: []string{Redlock5, Etcd3, ZK3, PgAdvisory, PgRow},
		runs: map[string][]Scenario{
			"smoke": {
				newRun(Redlock5, "none", 3, 8, Expect{Lost: Positive}),
				newRun(Redlock5, "claim-first", 3, 8, Expect{Lost: Zero, Rejection: true}),
				newRun(Redlock5, "fence-table", 3, 8, Expect{Lost: Zero}),
			},
			"quick": {
				newRun(Redlock5, "none", 4, 20, Expect{Overlaps: Zero, Lost: Positive}),
				newRun(Redlock5, "write-only", 4, 20, Expect{Overlaps: Zero}),
				newRun(Redlock5, "claim-first", 4, 20, Expect{Overlaps: Zero, Lost: Zero, Rejection: true}),
				newRun(Redlock5, "fence-table", 4, 20, Expect{Overlaps: Zero, Lost: Zero}),
				// etcd's lease ends while the holder is stopped, exactly as
				// a Redlock lease does: the same loss, the same cure.
				newRun(Etcd3, "none", 4, 20, Expect{Overlaps: Zero, Lost: Positive}),
				newRun(Etcd3, "claim-first", 4, 20, Expect{Overlaps: Zero, Lost: Zero, Rejection: true}),
				// A ZooKeeper session expires while its holder is stopped,
				// and the next holder's znode has a higher czxid.
				newRun(ZK3, "none", 4, 20, Expect{Overlaps: Zero, Lost: Positive}),
				newRun(ZK3, "claim-first", 4, 20, Expect{Overlaps: Zero, Lost: Zero, Rejection: true}),
				// The advisory lock and the row lock have no lease to lose:
				// the others wait for the whole freeze.
				newRun(PgAdvisory, "none", 4, 20, Expect{Overlaps: Zero, Lost: Zero, MinBlock: freezeWithoutTTL}),
				newRun(PgRow, "none", 4, 20, Expect{Overlaps: Zero, Lost: Zero, MinBlock: freezeWithoutTTL}),
			},
		},
		worker: gated([]gatePoint{gateRead}, []gatePoint{gateStart}),
		script: workerFreeze,
	})
}

// workerFreeze stops the holder with SIGSTOP right after it read the
// counter and keeps it stopped past its lease while the others work.
func workerFreeze(ctx context.Context, e *env) error {
	h := e.crew.holder()
	if _, err := h.waitGate(ctx, gateRead, 15*time.Second); err != nil {
		return err
	}
	if err := h.freeze(); err != nil {
		return err
	}
	e.log.mark(true)
	t0 := time.Now()
	if err := h.answer(); err != nil { // read by the worker once it runs again
		return err
	}
	for _, p := range e.crew.others() {
		if _, err := p.waitGate(ctx, gateStart, 10*time.Second); err != nil {
			return err
		}
		if err := p.answer(); err != nil {
			return err
		}
	}
	// Keep it stopped for twice its lease, and then let the others get some sections in before the holder wakes: the
	// stale write must come after a newer holder's, or there is nothing
	// to refuse. On a loaded machine that can take seconds. With
	// fence-table they wait on the frozen holder's row lock instead, so
	// do not wait long there; nor where the lock has no TTL, since then
	// nobody gets past the holder.
	// Where the others can get the lock during the freeze, it lasts until
	// at least one of them wrote, however long a loaded machine takes (a
	// stress run once saw none within 2*TTL + 10 s on etcd, and the holder's
	// late write then lost nothing), up to a minute more.
	var others int64
	var blocked time.Duration // until the first section of another worker
	wait, mustSee := 10*time.Second, true
	switch {
	case e.sc.TTL == 0:
		wait, mustSee = freezeWithoutTTL, false
	case e.sc.Fencing == "fence-table":
		wait, mustSee = 3*time.Second, false
	}
	deadline := t0.Add(2*e.sc.TTL + wait)
	last := deadline.Add(time.Minute)
	for ctx.Err() == nil {
		now := time.Now()
		others = e.crew.done() - h.done.Load()
		if others > 0 && blocked == 0 {
			blocked = now.Sub(t0)
		}
		if others >= 3 && now.Sub(t0) >= 2*e.sc.TTL {
			break
		}
		if !now.Before(deadline) && (!mustSee || others > 0 || !now.Before(last)) {
			break
		}
		_ = sleep(ctx, 5*time.Millisecond)
	}
	frozen := time.Since(t0)
	lease := "no lease"
	if e.sc.TTL > 0 {
		lease = "lease " + e.sc.TTL.String()
	}
	e.log.note("holder frozen (SIGSTOP) after its read for %v (%s); others did %d sections meanwhile",
		frozen.Round(time.Millisecond), lease, others)
	e.log.mark(false)
	if err := h.thaw(); err != nil {
		return err
	}
	if blocked == 0 {
		for e.crew.done()-h.done.Load() == 0 && ctx.Err() == nil {
			if time.Since(t0) > frozen+10*time.Second {
				return fmt.Errorf("chaos: no other worker got the lock within 10s of the holder's thaw")
			}
			_ = sleep(ctx, time.Millisecond)
		}
		blocked = time.Since(t0)
		e.log.note("the others' first section ended %v after the freeze began, %v after the thaw",
			blocked.Round(time.Millisecond), (blocked - frozen).Round(time.Millisecond))
	}
	e.log.setBlocked(blocked)
	return nil
}

// freezeWithoutTTL is how long the holder of a lock without a TTL stays
// frozen: nobody can take the lock meanwhile, so the run only has to show
// that they waited.
const freezeWithoutTTL = 2 * time.Second
