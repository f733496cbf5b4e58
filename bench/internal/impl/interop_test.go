package impl

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// TestRedsyncAndQuorumlockOnOneKeyExcludeEachOther is what docs/migrating.md
// promises a rollout from redsync: a redsync mutex and a quorumlock lease
// named alike, on the same five servers, are one lock. Both keep a plain
// string under the key as given, set only where it is absent, and touch it
// only while it holds their own value.
func TestRedsyncAndQuorumlockOnOneKeyExcludeEachOther(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := testenv.RedisNodes(t, 5)
	ql, err := redlock.New(testenv.Clients(t, ns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ql.Close() })
	if err := ql.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	pools := make([]rsredis.Pool, len(ns))
	for i, n := range ns {
		pools[i] = goredis.NewPool(n.Client(t))
	}
	rs := redsync.New(pools...)
	key := testenv.Key(t)
	mutex := func() *redsync.Mutex {
		return rs.NewMutex(key, redsync.WithExpiry(20*time.Second), redsync.WithTries(1))
	}

	// redsync holds: quorumlock is refused with "held".
	m := mutex()
	if err := m.LockContext(ctx); err != nil {
		t.Fatalf("redsync Lock on a free key: %v", err)
	}
	_, err = ql.TryLock(ctx, key, 10*time.Second)
	var ne *redlock.NotObtainedError
	if !errors.As(err, &ne) || ne.Reason != redlock.ReasonHeld {
		t.Fatalf("quorumlock TryLock while redsync holds the key: %v, want a NotObtainedError with reason %q", err, redlock.ReasonHeld)
	}
	if ok, err := m.ExtendContext(ctx); !ok || err != nil {
		t.Fatalf("redsync Extend after quorumlock's refused attempt: %v %v, want its key untouched", ok, err)
	}

	// A waiting Lock gets the key once redsync unlocks (redsync sends no
	// release notice: the waiter finds the key free on its next attempt).
	got := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 15*time.Second)
		defer wcancel()
		l, err := ql.Lock(wctx, key, 10*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	if ok, err := m.UnlockContext(ctx); !ok || err != nil {
		t.Fatalf("redsync Unlock: %v %v", ok, err)
	}
	if err := <-got; err != nil {
		t.Fatalf("quorumlock Lock waiting for redsync's key, then Release: %v", err)
	}

	// quorumlock holds: redsync is refused, and its unlock of a key it does
	// not hold leaves quorumlock's lease alone.
	l, err := ql.TryLock(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatalf("quorumlock TryLock on a free key: %v", err)
	}
	m = mutex()
	err = m.TryLockContext(ctx)
	var taken *redsync.ErrTaken
	if !errors.As(err, &taken) {
		t.Fatalf("redsync TryLock while quorumlock holds the key: %v, want *redsync.ErrTaken", err)
	}
	if len(taken.Nodes) < 3 {
		t.Fatalf("redsync found the key taken on nodes %v, want a majority", taken.Nodes)
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("quorumlock Extend after redsync's refused attempt: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("quorumlock Release: %v", err)
	}
	if err := mutex().LockContext(ctx); err != nil {
		t.Fatalf("redsync Lock after quorumlock released: %v", err)
	}
}
