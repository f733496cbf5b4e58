package quorum

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMajority(t *testing.T) {
	for n, want := range map[int]int{-1: 0, 0: 0, 1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
	}
}

// FuzzMajority checks the property Redlock needs: two majorities of the same
// n nodes always share a node, and a majority is the smallest such size.
func FuzzMajority(f *testing.F) {
	for _, n := range []int{1, 2, 3, 5, 7, 100} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int) {
		if n < 1 || n > 1<<30 {
			t.Skip()
		}
		q := Majority(n)
		if q < 1 || q > n {
			t.Fatalf("Majority(%d) = %d out of [1, n]", n, q)
		}
		if 2*q <= n {
			t.Fatalf("two majorities of %d (size %d) can be disjoint", n, q)
		}
		if 2*(q-1) > n {
			t.Fatalf("Majority(%d) = %d is not minimal", n, q)
		}
		if !Decided(n, q, q, 0) || Decided(n, q, q-1, n-q) || !Decided(n, q, 0, n-q+1) {
			t.Fatalf("Decided disagrees with Majority(%d) = %d", n, q)
		}
	})
}

var errNode = errors.New("node failed")

func okReply(r Reply[int]) bool { return r.Err == nil }

// delays builds a call whose node i answers after d[i] (negative: never,
// until its context is cancelled) and fails when fail[i] is set.
func delays(d []time.Duration, fail map[int]bool) func(context.Context, int) (int, error) {
	return func(ctx context.Context, i int) (int, error) {
		if d[i] < 0 {
			<-ctx.Done()
			return 0, ctx.Err()
		}
		select {
		case <-time.After(d[i]):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if fail[i] {
			return 0, errNode
		}
		return i * 10, nil
	}
}

func TestAwaitReturnsAtQuorumWithoutWaitingForStragglers(t *testing.T) {
	ms := time.Millisecond
	r := Start(nil, context.Background(), 5, delays([]time.Duration{ms, 2 * ms, 3 * ms, -1, -1}, nil))
	start := time.Now()
	got := r.Await(context.Background(), 3, okReply)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Await took %v with two nodes that never answer", took)
	}
	if len(got) != 3 {
		t.Fatalf("Await returned %d replies, want 3: %+v", len(got), got)
	}
	for _, rep := range got {
		if rep.Err != nil || rep.Val != rep.Node*10 {
			t.Fatalf("unexpected reply %+v", rep)
		}
	}
	r.Cancel()
	rest := r.Wait()
	if len(rest) != 2 {
		t.Fatalf("Wait returned %d straggler replies, want 2", len(rest))
	}
	for _, rep := range rest {
		if !errors.Is(rep.Err, context.Canceled) {
			t.Fatalf("straggler %d: err %v, want context.Canceled", rep.Node, rep.Err)
		}
	}
	if again := r.Wait(); len(again) != 2 {
		t.Fatalf("second Wait returned %d replies, want the same 2", len(again))
	}
}

func TestAwaitStopsWhenSuccessImpossible(t *testing.T) {
	ms := time.Millisecond
	fail := map[int]bool{0: true, 1: true, 2: true}
	r := Start(nil, context.Background(), 5, delays([]time.Duration{ms, ms, ms, -1, -1}, fail))
	got := r.Await(context.Background(), 3, okReply)
	if len(got) != 3 {
		t.Fatalf("Await returned %d replies, want the 3 failures", len(got))
	}
	for _, rep := range got {
		if !errors.Is(rep.Err, errNode) {
			t.Fatalf("reply %+v, want errNode", rep)
		}
	}
	r.Cancel()
	r.Wait()
}

func TestAwaitHonoursContext(t *testing.T) {
	r := Start(nil, context.Background(), 3, delays([]time.Duration{0, -1, -1}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	got := r.Await(ctx, 2, okReply)
	if len(got) != 1 || got[0].Node != 0 {
		t.Fatalf("Await = %+v, want only node 0", got)
	}
	if ctx.Err() == nil {
		t.Fatal("Await returned before its context ended")
	}
	r.Cancel()
	if rest := r.Wait(); len(rest) != 2 {
		t.Fatalf("Wait returned %d replies, want 2", len(rest))
	}
}

func TestAwaitContinues(t *testing.T) {
	ms := time.Millisecond
	r := Start(nil, context.Background(), 4, delays([]time.Duration{ms, 5 * ms, 10 * ms, 15 * ms}, nil))
	first := r.Await(context.Background(), 1, okReply)
	second := r.Await(context.Background(), 4, okReply)
	if len(first) != 1 || len(first)+len(second) != 4 {
		t.Fatalf("first %d replies, second %d, want 1 and 3", len(first), len(second))
	}
	seen := map[int]bool{}
	for _, rep := range append(first, second...) {
		if seen[rep.Node] {
			t.Fatalf("node %d returned twice", rep.Node)
		}
		seen[rep.Node] = true
	}
	if rest := r.Wait(); len(rest) != 0 {
		t.Fatalf("Wait returned %d replies after all were awaited", len(rest))
	}
}

func TestAwaitDiscountingGivesUpOnSuspects(t *testing.T) {
	ms := time.Millisecond
	// Node 2 fails, nodes 3 and 4 never answer: with them discounted the
	// round is hopeless (2 possible successes for 3 needed) at once.
	fail := map[int]bool{2: true}
	r := Start(nil, context.Background(), 5, delays([]time.Duration{ms, ms, ms, -1, -1}, fail))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	got := r.AwaitDiscounting(ctx, 3, okReply, func(i int) bool { return i >= 3 })
	if took := time.Since(start); took > time.Second {
		t.Fatalf("AwaitDiscounting waited %v for discounted nodes", took)
	}
	sawFailure := false
	for _, rep := range got {
		if rep.Node >= 3 {
			t.Fatalf("reply from node %d that never answers", rep.Node)
		}
		sawFailure = sawFailure || rep.Node == 2
	}
	if !sawFailure {
		t.Fatalf("returned %+v before the failure that made success impossible", got)
	}
	r.Cancel()
	r.Wait()

	// A discounted node that answers still counts toward success.
	r = Start(nil, context.Background(), 5, delays([]time.Duration{ms, ms, -1, 2 * ms, -1}, nil))
	got = r.AwaitDiscounting(ctx, 3, okReply, func(i int) bool { return i == 3 || i == 4 })
	good := 0
	for _, rep := range got {
		if rep.Err == nil {
			good++
		}
	}
	if good != 3 {
		t.Fatalf("got %d successes, want 3 including the discounted node 3: %+v", good, got)
	}
	r.Cancel()
	r.Wait()
}

// StartOwned hands the calls the caller's own context, Cancel cancels it,
// and Wait cancels it once every call has returned.
func TestStartOwnedUsesTheCallersContext(t *testing.T) {
	mine, cancel := context.WithCancel(context.Background())
	cancelled := 0
	r := StartOwned(nil, mine, func() { cancelled++; cancel() }, 3, func(ctx context.Context, i int) (int, error) {
		if ctx != mine {
			return 0, errors.New("a context derived from the caller's, not the caller's own")
		}
		if i == 2 {
			<-ctx.Done() // a straggler, ended by Cancel
			return 0, ctx.Err()
		}
		return i, nil
	})
	got := r.Await(context.Background(), 2, func(rep Reply[int]) bool { return rep.Err == nil })
	if len(got) != 2 {
		t.Fatalf("Await returned %d replies, want 2: %v", len(got), got)
	}
	r.Cancel()
	rest := r.Wait()
	if len(rest) != 1 || !errors.Is(rest[0].Err, context.Canceled) {
		t.Fatalf("the straggler's reply = %v, want context.Canceled", rest)
	}
	if again := r.Wait(); len(again) != 1 {
		t.Fatalf("a second Wait returned %d replies, want the same 1", len(again))
	}
	if cancelled != 2 { // once by Cancel, once by the first Wait
		t.Fatalf("cancel called %d times, want 2", cancelled)
	}
}

// A discounted node whose own answer clears its discount before the reply
// arrives (a reply clears a missed deadline) still takes the discount
// back: the round does not give up on a majority that is answering. It
// did, when discount was asked again at the reply.
func TestAwaitDiscounting_AnAnswerTakesBackItsDiscount(t *testing.T) {
	var missed [5]atomic.Bool
	missed[0].Store(true)
	missed[1].Store(true)
	r := Start(nil, context.Background(), 5, func(ctx context.Context, i int) (bool, error) {
		missed[i].Store(false)
		if i >= 2 {
			time.Sleep(20 * time.Millisecond) // nodes 0 and 1 answer first, with a no
			return true, nil
		}
		return false, nil
	})
	defer r.Wait()
	got := r.AwaitDiscounting(context.Background(), 3, func(rep Reply[bool]) bool { return rep.Val },
		func(i int) bool { return missed[i].Load() })
	yes := 0
	for _, rep := range got {
		if rep.Val {
			yes++
		}
	}
	if yes != 3 {
		t.Fatalf("the round gave up after %d replies with %d yes; want the majority of 3", len(got), yes)
	}
}
