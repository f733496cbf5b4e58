package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/drift"
	"github.com/quorumlock/quorumlock/redlock"
)

// script performs the run's fault while the workers run.
func (e *env) script(ctx context.Context) error {
	switch f := e.sc.Fault; {
	case f == "none" || f == "stall" || f == "kill-3":
		return nil
	case engineered(f):
		return e.doubleGrant(ctx)
	case f == "kill-1" || f == "kill-2":
		if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
			return err
		}
		k := 1
		if f == "kill-2" {
			k = 2
		}
		e.log.mark(true)
		for n := range k {
			if err := e.cluster.nodes[n].Kill(); err != nil {
				return err
			}
		}
		e.log.note("killed node(s) 0..%d for the rest of the run", k-1)
		return nil
	case f == "pause-primary-2":
		return e.window(ctx, func() error {
			return joinErr(e.cluster.nodes[0].Pause(), e.cluster.nodes[1].Pause())
		}, func() error {
			return joinErr(e.cluster.nodes[0].Resume(), e.cluster.nodes[1].Resume())
		})
	case f == "partition-2":
		// Each client loses two nodes of its own: the clients disagree on
		// which nodes are reachable, and every one still sees three.
		return e.window(ctx, func() error {
			for w, ps := range e.cluster.prox {
				ps[(2*w)%5].Blackhole(true)
				ps[(2*w+1)%5].Blackhole(true)
			}
			return nil
		}, func() error {
			for _, ps := range e.cluster.prox {
				for _, p := range ps {
					p.Heal()
				}
			}
			return nil
		})
	case f == "slow-1":
		if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
			return err
		}
		e.log.mark(true)
		for _, ps := range e.cluster.prox {
			ps[0].SetLatency(100 * time.Millisecond)
		}
		e.log.note("100ms added to node 0's replies for the rest of the run")
		return nil
	case f == "worker-freeze":
		return e.workerFreeze(ctx)
	case f == "worker-crash":
		return e.workerCrash(ctx)
	case f == "renewal-hang":
		return e.renewalHang(ctx)
	case f == "freeze-acquire":
		return e.freezeAcquire(ctx)
	case f == "mixed":
		return e.mixed(ctx)
	}
	return fmt.Errorf("chaos: fault %q has no script", e.sc.Fault)
}

func joinErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// faultWindow is how long pause-primary-2 and partition-2 last. Two
// seconds, not one: with two nodes silent the client grants only a few
// locks per second (see docs/chaos.md), and the run must see some.
const faultWindow = 2 * time.Second

// window applies a fault after warm-up for faultWindow, then heals it.
func (e *env) window(ctx context.Context, on, off func() error) error {
	if err := e.crew.warm(ctx, int64(2*e.sc.Workers)); err != nil {
		return err
	}
	e.log.mark(true)
	before := e.crew.done()
	if err := on(); err != nil {
		return err
	}
	err := sleep(ctx, faultWindow)
	e.log.mark(false)
	e.log.note("fault on for %v after %d sections; %d sections finished meanwhile", faultWindow, before, e.crew.done()-before)
	return joinErr(off(), err)
}

// doubleGrant scripts the faults that can make two holders coexist. The
// holder (worker 0) wins exactly nodes 0, 1 and 2 (its links to nodes 3
// and 4 are cut while it acquires); with it holding, node 2 loses the key
// (restart, clock jump) or, on single+replica, the primary dies and the
// replica that never saw the key is promoted. Then the challenger (worker
// 1) tries, for a third of the TTL, while the holder waits between its
// read and its write. A challenger that got in finishes a section, and the
// holder's write then rests on a stale read.
func (e *env) doubleGrant(ctx context.Context) error {
	h, w := e.crew.procs[0], e.crew.procs[1]
	redlock5 := e.sc.Topology == Redlock5
	if _, err := h.waitGate(ctx, "locked", 15*time.Second); err != nil {
		return err
	}
	e.log.mark(true)
	switch e.sc.Fault {
	case "restart-empty", "restart-empty-no-quarantine", "restart-aof":
		if err := e.cluster.nodes[2].Restart(ctx); err != nil {
			return err
		}
		e.log.note("holder locked nodes 0,1,2; node 2 restarted (kill -9, start)")
	case "restart-delayed":
		if err := e.cluster.nodes[2].Kill(); err != nil {
			return err
		}
		delay := e.sc.TTL + drift.Drift(e.sc.TTL, drift.DefaultFactor) + 200*time.Millisecond
		e.log.note("holder locked nodes 0,1,2; node 2 killed, restarts empty after %v", delay)
		t := time.AfterFunc(delay, func() { _ = e.cluster.nodes[2].Restart(context.WithoutCancel(ctx)) })
		defer func() {
			if !t.Stop() {
				return
			}
			_ = e.cluster.nodes[2].Restart(context.WithoutCancel(ctx))
		}()
	case "clock-jump":
		jump := 2*e.sc.TTL + time.Second
		if err := e.cluster.nodes[2].JumpClock(jump); err != nil {
			return err
		}
		how := ""
		if t, ok := e.cluster.nodes[2].(interface{ ClockTool() string }); ok {
			how = " with " + t.ClockTool()
		}
		e.log.note("holder locked nodes 0,1,2; node 2's clock jumped %v forward%s", jump, how)
		time.Sleep(5 * time.Millisecond) // the shim looks at its offset file at most every 2ms
	case "failover":
		if err := e.failover(ctx); err != nil {
			return err
		}
	}
	if redlock5 {
		e.cluster.prox[0][3].Cut(false)
		e.cluster.prox[0][4].Cut(false)
	}
	if err := h.answer(); err != nil {
		return err
	}
	if _, err := h.waitGate(ctx, "read", 10*time.Second); err != nil {
		return err
	}
	if _, err := w.waitGate(ctx, "start", 10*time.Second); err != nil {
		return err
	}
	if err := w.answer(); err != nil {
		return err
	}
	got := w.waitDone(ctx, 1, e.sc.TTL/3)
	e.log.note("challenger finished a section while the holder's lease was valid: %v", got)
	e.log.mark(false)
	return h.answer()
}

// prepare sets up what a scripted fault needs before the workers start.
func (e *env) prepare() error {
	if !engineered(e.sc.Fault) {
		return nil
	}
	if e.sc.Topology == Redlock5 {
		e.cluster.prox[0][3].Cut(true)
		e.cluster.prox[0][4].Cut(true)
		return nil
	}
	e.cluster.repl.Blackhole(true)
	e.log.note("replication link blackholed: the replica stops receiving writes")
	return nil
}

// failover kills the primary while the replication link is held back,
// promotes the replica and points every client at it.
func (e *env) failover(ctx context.Context) error {
	primary, replica := e.cluster.nodes[0], e.cluster.nodes[1]
	if err := primary.Kill(); err != nil {
		return err
	}
	e.cluster.repl.Cut(true) // what the replica never received is gone with the primary
	c := redis.NewClient(&redis.Options{Addr: replica.Addr(), MaxRetries: -1})
	defer c.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Do(pctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		return fmt.Errorf("chaos: promote the replica: %w", err)
	}
	for _, ps := range e.cluster.prox {
		ps[0].Retarget(replica.Addr())
	}
	e.log.note("holder locked the primary; primary killed, replica (which never saw the key) promoted, clients moved to it")
	return nil
}

// killThree kills three of five primaries before the workers start, and
// times one TryLock against the rest.
func (e *env) killThree(ctx context.Context) error {
	for n := range 3 {
		if err := e.cluster.nodes[n].Kill(); err != nil {
			return err
		}
	}
	e.log.mark(true)
	cs := e.cluster.directClients()
	defer closeAll(cs)
	lc, err := redlock.New(cs, redlock.WithMaxTTL(e.sc.TTL))
	if err != nil {
		return err
	}
	defer lc.Close()
	t0 := time.Now()
	l, err := lc.TryLock(ctx, "chaos:probe", e.sc.TTL)
	e.log.lockError(time.Since(t0), err)
	if l != nil {
		_ = l.Release(ctx)
	}
	e.log.note("nodes 0,1,2 killed before the workers started")
	return nil
}

// workerFreeze stops the holder with SIGSTOP right after it read the
// counter and keeps it stopped past its lease while the others work.
func (e *env) workerFreeze(ctx context.Context) error {
	h := e.crew.procs[0]
	if _, err := h.waitGate(ctx, "read", 15*time.Second); err != nil {
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
	for _, p := range e.crew.procs[1:] {
		if _, err := p.waitGate(ctx, "start", 10*time.Second); err != nil {
			return err
		}
		if err := p.answer(); err != nil {
			return err
		}
	}
	_ = sleep(ctx, 2*e.sc.TTL)
	// Let the others get some sections in; with fence-table they wait on
	// the frozen holder's row lock instead, so do not wait forever.
	var others int64
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		others = e.crew.done() - h.done.Load()
		if others >= 3 {
			break
		}
		_ = sleep(ctx, 5*time.Millisecond)
	}
	e.log.note("holder frozen (SIGSTOP) after its read for %v (lease %v); others did %d sections meanwhile",
		time.Since(t0).Round(time.Millisecond), e.sc.TTL, others)
	e.log.mark(false)
	return h.thaw()
}

// workerCrash kills the holder with SIGKILL while it holds the lock and
// measures how long the others wait for its lease to expire.
func (e *env) workerCrash(ctx context.Context) error {
	h := e.crew.procs[0]
	t0, err := e.blockOthers(ctx, "locked", h.kill, "after the holder's crash")
	if err != nil {
		return err
	}
	e.log.mark(false)
	e.log.note("holder killed (SIGKILL) while holding; first section by another worker finished %v later", time.Since(t0).Round(time.Millisecond))
	return nil
}

// renewalHang holds the holder's section between its read and its write
// (the process runs on: its Do keeps extending the lease) and measures how
// long the others wait. The hold cap ends the lease; once the others have
// done a few sections, the hung section resumes and writes on its stale
// read.
func (e *env) renewalHang(ctx context.Context) error {
	h := e.crew.procs[0]
	t0, err := e.blockOthers(ctx, "read", func() error { return nil }, "while the holder hung")
	if err != nil {
		return err
	}
	for e.crew.done() < 3 && time.Since(t0) < 10*time.Second {
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	e.log.note("holder's section hung after its read for %v with Do extending its lease (TTL %v, hold cap %v); the first other section finished %v after the others started trying",
		time.Since(t0).Round(time.Millisecond), e.sc.TTL, holdCap, e.log.blockedFor().Round(time.Millisecond))
	e.log.mark(false)
	return h.answer()
}

// blockOthers waits for the holder (worker 0) at gate and the others at
// their start, applies fault to the holder, lets the others try, and
// records in e.blocked how long it took until one of them finished a
// section (the lock was obtained about one section earlier). It returns
// when the others started trying.
func (e *env) blockOthers(ctx context.Context, gate Gate, fault func() error, what string) (time.Time, error) {
	if _, err := e.crew.procs[0].waitGate(ctx, gate, 15*time.Second); err != nil {
		return time.Time{}, err
	}
	for _, p := range e.crew.procs[1:] {
		if _, err := p.waitGate(ctx, "start", 10*time.Second); err != nil {
			return time.Time{}, err
		}
	}
	if err := fault(); err != nil {
		return time.Time{}, err
	}
	t0 := time.Now()
	e.log.mark(true)
	for _, p := range e.crew.procs[1:] {
		if err := p.answer(); err != nil {
			return t0, err
		}
	}
	for e.crew.done() == 0 {
		if time.Since(t0) > 10*time.Second {
			return t0, fmt.Errorf("chaos: no worker got the lock within 10s %s", what)
		}
		if err := sleep(ctx, time.Millisecond); err != nil {
			return t0, err
		}
	}
	e.log.setBlocked(time.Since(t0))
	return t0, nil
}

// freezeAcquire stops a worker while its acquire round is in flight (its
// replies are slowed to make the round last), for two TTLs.
func (e *env) freezeAcquire(ctx context.Context) error {
	h := e.crew.procs[0]
	if _, err := h.waitGate(ctx, "start", 15*time.Second); err != nil {
		return err
	}
	if err := e.crew.warm(ctx, 3); err != nil {
		return err
	}
	for _, p := range e.cluster.prox[0] {
		p.SetLatency(15 * time.Millisecond)
	}
	e.log.mark(true)
	if err := h.answer(); err != nil {
		return err
	}
	time.Sleep(5 * time.Millisecond)
	if err := h.freeze(); err != nil {
		return err
	}
	_ = sleep(ctx, 2*e.sc.TTL)
	for _, p := range e.cluster.prox[0] {
		p.SetLatency(0)
	}
	e.log.mark(false)
	e.log.note("worker 0 frozen 5ms into an acquire round (15ms replies) for %v", 2*e.sc.TTL)
	return h.thaw()
}

// mixed runs a seeded schedule of faults until the workers are done. At
// most two nodes are impaired at any time (a restarted node counts until
// its quarantine is over), so the quorum always exists.
func (e *env) mixed(ctx context.Context) error {
	if err := e.crew.warm(ctx, int64(e.sc.Workers)); err != nil {
		return err
	}
	e.log.mark(true)
	var wg sync.WaitGroup
	defer wg.Wait()
	busy := make([]time.Time, e.cluster.lockN)
	start := time.Now()
	quarantine := e.sc.TTL + drift.Drift(e.sc.TTL, drift.DefaultFactor)
	for ctx.Err() == nil {
		if err := sleep(ctx, time.Duration(200+e.rng.IntN(300))*time.Millisecond); err != nil {
			return nil
		}
		now := time.Now()
		var free []int
		impaired := 0
		for n, until := range busy {
			if until.After(now) {
				impaired++
			} else {
				free = append(free, n)
			}
		}
		action := e.rng.IntN(5)
		if impaired >= 2 && action != 4 {
			action = 4
		}
		n := -1
		if len(free) > 0 {
			n = free[e.rng.IntN(len(free))]
		}
		at := time.Since(start).Seconds()
		switch action {
		case 0:
			busy[n] = now.Add(quarantine + 500*time.Millisecond)
			e.log.note("t=%.2fs kill -9 node %d, restart empty", at, n)
			node := e.cluster.nodes[n]
			wg.Go(func() { _ = node.Restart(context.WithoutCancel(ctx)) })
		case 1:
			busy[n] = now.Add(400 * time.Millisecond)
			e.log.note("t=%.2fs pause node %d for 300ms", at, n)
			node := e.cluster.nodes[n]
			if err := node.Pause(); err == nil {
				wg.Go(func() { time.Sleep(300 * time.Millisecond); _ = node.Resume() })
			}
		case 2:
			w := e.rng.IntN(e.sc.Workers)
			busy[n] = now.Add(500 * time.Millisecond)
			e.log.note("t=%.2fs blackhole node %d for worker %d for 400ms", at, n, w)
			p := e.cluster.prox[w][n]
			p.Blackhole(true)
			wg.Go(func() { time.Sleep(400 * time.Millisecond); p.Blackhole(false) })
		case 3:
			busy[n] = now.Add(500 * time.Millisecond)
			e.log.note("t=%.2fs node %d 80ms slower for everyone for 400ms", at, n)
			for w := range e.cluster.prox {
				p := e.cluster.prox[w][n]
				p.SetLatency(80 * time.Millisecond)
				wg.Go(func() { time.Sleep(400 * time.Millisecond); p.SetLatency(0) })
			}
		case 4:
			w := e.rng.IntN(e.sc.Workers)
			p := e.crew.procs[w]
			d := e.sc.TTL * 3 / 2
			e.log.note("t=%.2fs freeze worker %d for %v", at, w, d)
			if err := p.freeze(); err == nil {
				wg.Go(func() { time.Sleep(d); _ = p.thaw() })
			}
		}
	}
	return nil
}
