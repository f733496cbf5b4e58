package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// The chunks of one renewal pass are out together, not one after
// another: each extend call here takes 60 ms to reach its node (a hook
// stands in for a slow or busy link), and 48 leases of 3 s due together
// go in 48 chunks of one. One after another, the pass would take 2.9 s,
// and the last chunks would come after their leases' validity (the pass
// starts about 0.75 s after they were taken); 8 at a time, which a node's
// batcher sends in two or three round trips, it takes about 1 s, and
// every lease is renewed before it ends.
//
// Guards against: a renewer that waits for each chunk's round before it
// sends the next, which on a busy host (every round slow) renews the
// leases late in a pass after their validity, as a Client holding 10,000
// leases did in one quick benchmark run beside a burst of compiles.
func TestRenew_TheChunksOfAPassAreOutTogether(t *testing.T) {
	cl := newCluster(t, 5)
	const leases, chunk, ttl, latency = 48, 1, 3 * time.Second, 60 * time.Millisecond
	ctx := context.Background()
	c, f := cl.ready(t, WithMaxTTL(ttl))
	c.renew.chunk = chunk
	ls := takeLeases(t, c, leases, ttl)
	// One extend first, so that the nodes have the script cached: a
	// NOSCRIPT and the script sent again would cost every call two trips.
	require.NoError(t, ls[0].Extend(ctx, ttl))
	var mu sync.Mutex
	var out, most int // extend calls out at once now, and at most
	f.before(func(ctx context.Context, x *call) error {
		if x.Script != "extend" {
			return nil
		}
		mu.Lock()
		out++
		most = max(most, out)
		mu.Unlock()
		defer func() {
			mu.Lock()
			out--
			mu.Unlock()
		}()
		select {
		case <-time.After(latency):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	granted := renewAll(t, c, ls, ttl)
	// Every lease renewed once (its deadline moved), and none ended
	// before: a lease renewed after its validity is over for good.
	ended := -1
	require.Eventually(t, func() bool {
		for i, l := range ls {
			if l.over() {
				ended = i
				return true
			}
			if !l.Deadline().After(granted[i]) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "the leases were not all renewed in 5 s")
	require.Equal(t, -1, ended, "a lease ended before its renewal")
	mu.Lock()
	defer mu.Unlock()
	// 48 chunks on 5 nodes: with the pass's chunks out together, several
	// calls per node wait in the hook at once (one at a time would be at
	// most 5).
	require.Greater(t, most, 5, "at most %d extend calls were out at once", most)
}

// renewAll hands ls to c's renewer at once, as Do does for each lease, so
// that all of them fall due in one pass, and returns each lease's
// deadline before its first renewal. The leases leave the renewer and are
// released when t ends.
func renewAll(t *testing.T, c *Client, ls []*Lease, ttl time.Duration) []time.Time {
	granted := make([]time.Time, len(ls))
	for i, l := range ls {
		granted[i] = l.Deadline()
		c.renew.add(l, ttl)
	}
	t.Cleanup(func() {
		for _, l := range ls {
			c.renew.remove(l)
			_ = l.Release(context.Background())
		}
	})
	return granted
}

// takeLeases takes n leases of ttl on c, on keys of t's own.
func takeLeases(t *testing.T, c *Client, n int, ttl time.Duration) []*Lease {
	t.Helper()
	ls := make([]*Lease, n)
	for i := range ls {
		l, err := c.TryLock(context.Background(), fmt.Sprintf("%s-%d", testenv.Key(t), i), ttl)
		require.NoError(t, err)
		ls[i] = l
	}
	return ls
}

// A renewal round waits for calls that are later than the node timeout,
// up to a sixth of the ttl: every extend call here reaches its node
// halfway between the two (650 ms at a 6 s ttl and the tests' 300 ms node
// timeout; a hook stands in for a host whose busy cores make every call
// late). Bounded by the node timeout, every round gave up on its calls
// before they were sent, and the lease ran out 6 s after it was taken;
// bounded by the renewal bound, Do keeps it as long as fn runs.
// Lease.Extend, which a caller waits on, keeps the node timeout.
//
// Guards against: renewal calls bounded by the node timeout, which on a
// busy host lost most of 10,000 leases held under Do at once
// (results/2026-12-07-renew-bound.md).
func TestRenew_ARoundWaitsForLateCallsUpToItsBound(t *testing.T) {
	cl := newCluster(t, 5)
	const ttl, held = 6 * time.Second, 7 * time.Second
	ctx := context.Background()
	c, f := cl.ready(t, WithMaxTTL(ttl))
	timeout, bound := c.nodeTimeout(ttl), c.renewBound(ttl)
	require.GreaterOrEqual(t, bound-timeout, 400*time.Millisecond, "no room between the node timeout and the renewal bound")
	late := (timeout + bound) / 2
	key := testenv.Key(t)
	var extendErr error
	err := c.Do(ctx, key, ttl, func(fctx context.Context, l *Lease) error {
		// One extend first, so that the nodes have the script cached: a
		// NOSCRIPT, late too, would leave no time for the script sent
		// again.
		if err := l.Extend(fctx, ttl); err != nil {
			return err
		}
		// Every extend from now on reaches its node late.
		f.delay(late, "extend")
		// A caller's own Extend gives up at the node timeout.
		extendErr = l.Extend(fctx, ttl)
		tm := time.NewTimer(held)
		defer tm.Stop()
		select {
		case <-tm.C:
			return nil
		case <-fctx.Done():
			return context.Cause(fctx)
		}
	})
	f.heal()
	require.NoError(t, err, "the lease was not kept while its renewals were %v late", late)
	require.Error(t, extendErr, "Lease.Extend waited past the node timeout")
	require.NotErrorIs(t, extendErr, ErrNotHeld)
}

// A chunk that waits for a slow majority holds up no other lease, and a
// lease is never in two rounds at once: lease a's extend calls take
// 1.8 s (inside the 2 s renewal bound of a 12 s ttl); lease b, kept from
// 1.4 s after a (too late to share a's round: leases due within a
// quarter of their period go together), falls due while a's round is
// out and is renewed then, not after it; and no key is in two extend
// calls to one node at once.
//
// Guards against: a renewer whose next pass waits for every chunk of the
// last, where one slow round delays every lease due meanwhile by up to
// its bound (500 ms at 3 s), five chunks deep in a pass of 10,000.
func TestRenew_ASlowRoundHoldsUpNoOtherLease(t *testing.T) {
	cl := newCluster(t, 5)
	const ttl, slow, after = 12 * time.Second, 1800 * time.Millisecond, 1400 * time.Millisecond
	ctx := context.Background()
	c, f := cl.ready(t, WithMaxTTL(ttl))
	c.renew.chunk = 1
	require.Less(t, slow, c.renewBound(ttl))
	ls := takeLeases(t, c, 2, ttl)
	// One extend first, so that the nodes have the script cached, of
	// another lease: its calls past the majority may reach the hook
	// after this, and must not be taken for a's.
	require.NoError(t, ls[1].Extend(ctx, ttl))
	a := ls[0].key
	var mu sync.Mutex
	inFlight := map[scriptAtKey]int{}
	var twice []string
	var aStart, aEnd, bStart time.Time
	var b string
	f.before(func(ctx context.Context, x *call) error {
		if x.Script != "extend" {
			return nil
		}
		now := time.Now()
		mu.Lock()
		for _, k := range x.Keys {
			if k != a && k != b {
				continue // the nodes' own keys, which every call names
			}
			at := scriptAtKey{x.Node, k}
			if inFlight[at]++; inFlight[at] > 1 {
				twice = append(twice, k)
			}
			switch {
			case k == a && aStart.IsZero():
				aStart = now
			case k == b && bStart.IsZero():
				bStart = now
			}
		}
		isA := slices.Contains(x.Keys, a)
		mu.Unlock()
		defer func() {
			mu.Lock()
			for _, k := range x.Keys {
				if k == a || k == b {
					inFlight[scriptAtKey{x.Node, k}]--
				}
			}
			if isA && aEnd.IsZero() && !aStart.IsZero() {
				aEnd = time.Now()
			}
			mu.Unlock()
		}()
		if !isA {
			return nil
		}
		select {
		case <-time.After(slow):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	lb := takeLeases(t, c, 1, ttl)
	mu.Lock()
	b = lb[0].key
	mu.Unlock()
	renewAll(t, c, ls[:1], ttl)
	time.Sleep(after)
	renewAll(t, c, lb, ttl)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return !bStart.IsZero() && !aEnd.IsZero()
	}, 15*time.Second, 10*time.Millisecond, "the two leases were not both renewed")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, twice, "a key was in two extend calls to one node at once")
	require.True(t, bStart.Before(aEnd), "b's round began %v after a's slow round ended: it waited for it",
		bStart.Sub(aEnd))
	require.False(t, ls[0].over() || lb[0].over(), "a lease ended")
}

// scriptAtKey is one key on one node.
type scriptAtKey struct {
	node int
	key  string
}

// Close while renewal rounds wait for slow nodes: the rounds out end by
// their bound and Close waits for them, but the leases still waiting for
// a free slot get no round, neither before Close returns nor after. Ten
// leases due together, one per chunk, every extend call 800 ms late
// (inside the 1 s bound of a 6 s ttl): Close comes while the first
// eight rounds are out, so at most eight of the ten keys are extended.
//
// Guards against: a renewer that, told to close while it waits for a
// slot, takes the slot once a slow round frees it and sends the rest of
// the pass (spawn runs it at once after Close, and Close waits for it):
// extends of leases the closed Client no longer keeps, and a Close as
// long as every chunk's bound one after another.
func TestRenew_CloseDuringSlowRoundsSendsNoMore(t *testing.T) {
	cl := newCluster(t, 5)
	// 800 ms late, a bound of 1 s: Close must come before the first round
	// out ends, and 800 ms leaves room for a loaded machine.
	const ttl, late = 6 * time.Second, 800 * time.Millisecond
	ctx := context.Background()
	c, f := cl.ready(t, WithMaxTTL(ttl))
	c.renew.chunk = 1
	slots := cap(c.renew.out)
	require.Less(t, late, c.renewBound(ttl))
	ls := takeLeases(t, c, slots+3, ttl)
	// The script cached on every node first, with a lease not watched
	// below (its calls past the majority may reach the hook later): a
	// NOSCRIPT, late too, would leave no time for the script sent again.
	warm := ls[0]
	ls = ls[1:]
	require.NoError(t, warm.Extend(ctx, ttl))
	t.Cleanup(func() { _ = warm.Release(context.Background()) })
	keys := map[string]bool{}
	for _, l := range ls {
		keys[l.key] = true
	}
	var mu sync.Mutex
	extended := map[string]bool{}
	first := make(chan struct{})
	var once sync.Once
	f.before(func(ctx context.Context, x *call) error {
		if x.Script != "extend" {
			return nil
		}
		mu.Lock()
		ours := false
		for _, k := range x.Keys {
			if keys[k] {
				extended[k], ours = true, true
			}
		}
		mu.Unlock()
		if !ours {
			return nil
		}
		once.Do(func() { close(first) })
		select {
		case <-time.After(late):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	renewAll(t, c, ls, ttl)
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("no renewal round started")
	}
	start := time.Now()
	require.NoError(t, c.Close())
	took := time.Since(start)
	// Anything Close let out would have run before it returned; a little
	// longer for calls past the majority.
	time.Sleep(2 * late)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("Close took %v; %d of %d keys extended", took, len(extended), len(ls))
	require.LessOrEqual(t, len(extended), slots, "%d of %d keys were extended: rounds went out after Close", len(extended), len(ls))
	limit := 2 * c.renewBound(ttl)
	if raceDetector {
		limit *= 3
	}
	require.Less(t, took, limit, "Close took %v: it waited for more rounds than were out", took)
}
