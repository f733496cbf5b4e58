package quorum

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// goid is the id of the calling goroutine, from its stack header.
func goid() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	return string(f[1])
}

// waitFor polls cond for up to 5 s and fails with the message msg gives.
func waitFor(t *testing.T, cond func() bool, msg func() string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg())
		}
		time.Sleep(time.Millisecond)
	}
}

// waitIdle waits until p has n idle goroutines.
func waitIdle(t *testing.T, p *Pool, n int) {
	t.Helper()
	waitFor(t, func() bool { return p.idleCount() == n },
		func() string { return fmt.Sprintf("the pool has %d idle goroutines, want %d", p.idleCount(), n) })
}

// run runs a call on p and waits up to 5 s for it, returning the goroutine
// it ran on.
func run(t *testing.T, p *Pool) string {
	t.Helper()
	ran := make(chan string, 1)
	p.Go(func() { ran <- goid() })
	select {
	case id := <-ran:
		return id
	case <-time.After(5 * time.Second):
		t.Fatal("a call given to the pool did not run")
		return ""
	}
}

// atOnce runs n calls on p at the same time and waits until all returned.
func atOnce(p *Pool, n int) {
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); <-gate })
	}
	close(gate)
	wg.Wait()
}

func TestPoolReusesTheGoroutineIdleLongestAgoLast(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := NewPool(time.Minute, 100)
	defer p.Close()
	first := run(t, p)
	waitIdle(t, p, 1)
	if again := run(t, p); again != first {
		t.Fatalf("the second call ran on goroutine %s, not on the idle %s", again, first)
	}
	waitIdle(t, p, 1)

	// Two at once: two goroutines; the next call gets the one that went
	// idle last.
	gate := make(chan struct{})
	ids := make(chan string, 2)
	for range 2 {
		p.Go(func() { <-gate; ids <- goid() })
	}
	waitIdle(t, p, 0)
	close(gate)
	a, b := <-ids, <-ids
	waitIdle(t, p, 2)
	if a == b {
		t.Fatalf("two calls at once ran on one goroutine %s", a)
	}
	last, oldest := top(p), bottom(p)
	p.Go(func() {})
	waitIdle(t, p, 2)
	if top(p) != last || bottom(p) != oldest {
		t.Fatal("the call did not run on the goroutine that went idle last")
	}
}

func top(p *Pool) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle[len(p.idle)-1]
}

func bottom(p *Pool) *worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idle[0]
}

func TestPoolRetiresAGoroutineIdleTooLongWhenItIsNextUsed(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := NewPool(20*time.Millisecond, 100)
	defer p.Close()
	atOnce(p, 3)
	waitIdle(t, p, 3)
	time.Sleep(40 * time.Millisecond)
	// This call takes the newest idle goroutine and retires the oldest;
	// the third stays until the next use.
	run(t, p)
	waitIdle(t, p, 2)
	before := runtime.NumGoroutine()
	run(t, p)
	waitIdle(t, p, 1)
	waitFor(t, func() bool { return runtime.NumGoroutine() < before }, func() string {
		return fmt.Sprintf("a retired goroutine did not exit: %d goroutines, %d before", runtime.NumGoroutine(), before)
	})
}

func TestPoolCloseRetiresIdleAndRunningGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := NewPool(time.Minute, 100)
	run(t, p)
	waitIdle(t, p, 1)
	gate := make(chan struct{})
	done := make(chan struct{})
	p.Go(func() { <-gate; close(done) }) // takes the idle goroutine
	p.Go(func() {})                      // a second, new one that parks
	waitIdle(t, p, 1)
	p.Close()
	if n := p.idleCount(); n != 0 {
		t.Fatalf("%d idle goroutines after Close", n)
	}
	close(gate) // the running call returns, and its goroutine retires
	<-done
	// Go still runs calls after Close (run fails if one does not), on
	// goroutines of their own.
	if a, b := run(t, p), run(t, p); a == b {
		t.Fatalf("two calls after Close ran on one goroutine %s", a)
	}
	if n := p.idleCount(); n != 0 {
		t.Fatalf("a goroutine parked in a closed pool: %d idle", n)
	}
}

func TestNilPoolStartsAGoroutinePerCall(t *testing.T) {
	var p *Pool
	if a, b := run(t, p), run(t, p); a == b {
		t.Fatalf("two calls on a nil pool ran on one goroutine %s", a)
	}
	p.Close()
}

// A round on a pool behaves as one without: every call runs, with its
// node index, and Wait collects what Await did not hand out.
func TestStart_RunsTheCallsOnAPool(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := NewPool(time.Minute, 100)
	defer p.Close()
	for range 3 {
		r := Start(p, context.Background(), 5, func(_ context.Context, i int) (int, error) { return i * 10, nil })
		got := append(r.Await(context.Background(), 3, func(Reply[int]) bool { return true }), r.Wait()...)
		if len(got) != 5 {
			t.Fatalf("%d replies, want 5", len(got))
		}
		seen := map[int]bool{}
		for _, rep := range got {
			if rep.Val != rep.Node*10 || seen[rep.Node] {
				t.Fatalf("reply %+v", rep)
			}
			seen[rep.Node] = true
		}
	}
	// The calls ran on the pool: their goroutines wait there now (how
	// many depends on how the calls overlapped).
	waitFor(t, func() bool { return p.idleCount() > 0 },
		func() string { return "no goroutine of the rounds waits in the pool" })
}

func TestPoolKeepsAtMostMaxIdleGoroutines(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	p := NewPool(time.Minute, 2)
	defer p.Close()
	before := runtime.NumGoroutine()
	atOnce(p, 5)
	waitIdle(t, p, 2)
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before+2 }, func() string {
		return fmt.Sprintf("%d goroutines, want at most %d: the ones beyond maxIdle did not exit", runtime.NumGoroutine(), before+2)
	})
}
