package redlock

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// recorder is an in-memory span exporter for one test.
func recorder(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return sr, tp
}

// spansNamed returns the ended spans called name, in the order they ended.
func spansNamed(sr *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attrOf(attrs []attribute.KeyValue, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range attrs {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func TestTraces_LockSpanHasAttemptsNodesWaitAndToken(t *testing.T) {
	sr, tp := recorder(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithFencing(), WithTracerProvider(tp))
	key := testenv.Key(t)
	// Another owner holds the key on every node for a while: the first
	// attempt finds it held everywhere, a later one obtains it.
	cl.hold(t, key, 300*time.Millisecond, cl.all()...)

	l, err := c.Lock(context.Background(), key, time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))

	spans := spansNamed(sr, "quorumlock.Lock")
	require.Len(t, spans, 1)
	s := spans[0]
	attrs := s.Attributes()
	outcome, _ := attrOf(attrs, attrOutcome)
	require.Equal(t, "obtained", outcome.AsString())
	attempts, _ := attrOf(attrs, attrAttempts)
	require.GreaterOrEqual(t, attempts.AsInt64(), int64(2), "the first attempt found the key held")
	wait, _ := attrOf(attrs, attrWait)
	require.Greater(t, wait.AsFloat64(), 0.0)
	token, ok := attrOf(attrs, attrToken)
	require.True(t, ok, "a fenced lease's span carries its token")
	require.Equal(t, int64(l.FencingToken()), token.AsInt64())
	ttl, _ := attrOf(attrs, attrTTL)
	require.Equal(t, int64(1000), ttl.AsInt64())
	_, ok = attrOf(attrs, attrKey)
	require.False(t, ok, "the key is an attribute only with WithKeyAttribute")

	// One event per attempt, with each node's answer.
	events := s.Events()
	require.Len(t, events, int(attempts.AsInt64()))
	first, _ := attrOf(events[0].Attributes, attrOutcome)
	require.Equal(t, "held", first.AsString())
	nodes, _ := attrOf(events[0].Attributes, attrNodes)
	require.Len(t, nodes.AsStringSlice(), 5)
	require.Contains(t, nodes.AsStringSlice(), "held")
	require.NotContains(t, nodes.AsStringSlice(), "granted")
	last := events[len(events)-1]
	lastOutcome, _ := attrOf(last.Attributes, attrOutcome)
	require.Equal(t, "obtained", lastOutcome.AsString())
	granted, _ := attrOf(last.Attributes, attrGranted)
	require.GreaterOrEqual(t, granted.AsInt64(), int64(3))

	rel := spansNamed(sr, "quorumlock.Release")
	require.Len(t, rel, 1)
	held, ok := attrOf(rel[0].Attributes(), attrHeld)
	require.True(t, ok)
	require.GreaterOrEqual(t, held.AsFloat64(), 0.0)
	require.Positive(t, held.AsFloat64(), "the lease was held for some time between Lock and Release")
	require.Equal(t, "Unset", rel[0].Status().Code.String())
	relOutcome, _ := attrOf(rel[0].Attributes(), attrOutcome)
	require.Equal(t, "released", relOutcome.AsString(), "the Release span says how it went")
}

func TestTraces_FailedTryLockAndExtendAreErrors(t *testing.T) {
	sr, tp := recorder(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithTracerProvider(tp), WithKeyAttribute())
	ctx := context.Background()
	key := testenv.Key(t)
	l, err := c.TryLock(ctx, key, time.Second)
	require.NoError(t, err)
	_, err = c.TryLock(ctx, key, time.Second)
	require.ErrorIs(t, err, ErrNotObtained)
	cl.set(t, key, "thief", time.Minute, cl.all()...)
	require.ErrorIs(t, l.Extend(ctx, time.Second), ErrNotHeld)

	tries := spansNamed(sr, "quorumlock.TryLock")
	require.Len(t, tries, 2)
	require.Equal(t, "Unset", tries[0].Status().Code.String())
	require.Equal(t, "Error", tries[1].Status().Code.String())
	outcome, _ := attrOf(tries[1].Attributes(), attrOutcome)
	require.Equal(t, "held", outcome.AsString())
	attempts, _ := attrOf(tries[1].Attributes(), attrAttempts)
	require.Equal(t, int64(1), attempts.AsInt64())
	k, ok := attrOf(tries[1].Attributes(), attrKey)
	require.True(t, ok, "WithKeyAttribute puts the key on the span")
	require.Equal(t, key, k.AsString())

	ext := spansNamed(sr, "quorumlock.Extend")
	require.Len(t, ext, 1)
	require.Equal(t, "Error", ext[0].Status().Code.String())
	require.Contains(t, ext[0].Status().Description, "lease not held")
	extOutcome, _ := attrOf(ext[0].Attributes(), attrOutcome)
	require.Equal(t, "lost", extOutcome.AsString(), "the Extend span says how it went")
	// The lost lease's Release: nothing to give back.
	require.ErrorIs(t, l.Release(ctx), ErrNotHeld)
	rel := spansNamed(sr, "quorumlock.Release")
	require.Len(t, rel, 1)
	relOutcome, _ := attrOf(rel[0].Attributes(), attrOutcome)
	require.Equal(t, "not_held", relOutcome.AsString())
}

func TestTraces_DoIsTheParentOfLockAndOfFn(t *testing.T) {
	sr, tp := recorder(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithTracerProvider(tp))
	key := testenv.Key(t)
	err := c.Do(context.Background(), key, time.Second, func(ctx context.Context, _ *Lease) error {
		_, span := tp.Tracer("app").Start(ctx, "app.work")
		span.End()
		return nil
	})
	require.NoError(t, err)

	do := spansNamed(sr, "quorumlock.Do")
	require.Len(t, do, 1)
	outcome, _ := attrOf(do[0].Attributes(), attrOutcome)
	require.Equal(t, "ok", outcome.AsString())
	for _, name := range []string{"quorumlock.Lock", "quorumlock.Release", "app.work"} {
		s := spansNamed(sr, name)
		require.Len(t, s, 1, name)
		require.Equal(t, do[0].SpanContext().SpanID(), s[0].Parent().SpanID(), "%s is a child of Do's span", name)
	}
}

func TestTraces_AdmissionSpansSayQuarantinedThenAdmitted(t *testing.T) {
	sr, tp := recorder(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithTracerProvider(tp), WithMaxTTL(300*time.Millisecond), WithNodeTimeout(200*time.Millisecond))
	ctx := context.Background()
	cl.wipe(t, 2)
	// The wiped node refuses to vote, and the attempt starts its
	// quarantine; the lock does not need it.
	l, err := c.TryLock(ctx, testenv.Key(t), 300*time.Millisecond)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	require.Eventually(t, func() bool { return cl.admittedOn(t, 2) }, 5*time.Second, 10*time.Millisecond, "node 2 was not admitted again")

	outcomes := map[string]int{}
	nodes := map[int64]bool{}
	var left float64
	require.Eventually(t, func() bool {
		clear(outcomes)
		for _, s := range spansNamed(sr, "quorumlock.admit") {
			node, _ := attrOf(s.Attributes(), attrNode)
			nodes[node.AsInt64()] = true
			o, _ := attrOf(s.Attributes(), attrOutcome)
			outcomes[o.AsString()]++
			if l, ok := attrOf(s.Attributes(), attrLeft); ok {
				left = max(left, l.AsFloat64())
			}
		}
		return outcomes["admitted"] > 0
	}, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, map[int64]bool{2: true}, nodes, "only the wiped node is checked")
	require.Positive(t, outcomes["quarantined"], "outcomes: %v", outcomes)
	require.Equal(t, 1, outcomes["admitted"], "outcomes: %v", outcomes)
	require.Greater(t, left, 0.0)
}

func TestTraces_DoSpanSaysLostWhenTheLeaseIsTaken(t *testing.T) {
	sr, tp := recorder(t)
	cl := newCluster(t, 5)
	c, _ := cl.ready(t, WithTracerProvider(tp))
	key := testenv.Key(t)
	err := c.Do(context.Background(), key, 300*time.Millisecond, func(ctx context.Context, _ *Lease) error {
		cl.set(t, key, "thief", time.Minute, cl.all()...)
		<-ctx.Done() // the next renewal finds the key taken
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, ErrNotHeld)

	do := spansNamed(sr, "quorumlock.Do")
	require.Len(t, do, 1)
	outcome, _ := attrOf(do[0].Attributes(), attrOutcome)
	require.Equal(t, "lost", outcome.AsString())
	require.Equal(t, "Error", do[0].Status().Code.String())
}

// panicOnStart is a span processor that panics (or, with exit, calls
// runtime.Goexit, as t.FailNow does) when a span of the given name
// starts: a stand-in for any user code (a tracer, a logger, a clock) that
// panics inside Lock.
type panicOnStart struct {
	name string
	exit bool
}

func (p panicOnStart) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	if s.Name() != p.name {
		return
	}
	if p.exit {
		runtime.Goexit()
	}
	panic("span boom")
}
func (panicOnStart) OnEnd(sdktrace.ReadOnlySpan)      {}
func (panicOnStart) Shutdown(context.Context) error   { return nil }
func (panicOnStart) ForceFlush(context.Context) error { return nil }

// Do and DoAll take their leases on a goroutine of their own (aside), so
// that the caller's stack is not left grown while fn holds them. A panic
// while the lease is taken must still reach the caller's goroutine, where
// a deferred recover finds its value, as when Lock ran there; fn does not
// run.
//
// Guards against: aside losing the panic (it would crash the process from
// the goroutine that ran Lock, out of the caller's reach).
func TestDo_APanicWhileTakingTheLeaseReachesTheCaller(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicOnStart{name: "quorumlock.Lock"}))
	c := newCluster(t, 3).client(t, WithTracerProvider(tp))
	ctx := context.Background()
	key := testenv.Key(t)
	calls := map[string]func(context.Context) error{
		"Do": func(ctx context.Context) error {
			return c.Do(ctx, key, time.Second, func(context.Context, *Lease) error { return errors.New("fn ran") })
		},
		"DoAll": func(ctx context.Context) error {
			return c.DoAll(ctx, []string{key, key + "-2"}, time.Second, func(context.Context, *LeaseSet) error { return errors.New("fn ran") })
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			var recovered any
			var err error
			func() {
				defer func() { recovered = recover() }()
				err = call(ctx)
			}()
			require.Equal(t, "span boom", recovered, "%s returned %v instead of panicking", name, err)
		})
	}

	// A Goexit in Lock ends the caller's goroutine, deferred calls run,
	// and Do does not return.
	tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicOnStart{name: "quorumlock.Lock", exit: true}))
	c = newCluster(t, 3).client(t, WithTracerProvider(tp))
	returned, exited := false, make(chan any, 1)
	go func() {
		defer func() { exited <- recover() }()
		_ = c.Do(ctx, key, time.Second, func(context.Context, *Lease) error { return nil })
		returned = true
	}()
	select {
	case p := <-exited:
		require.Nil(t, p, "a Goexit in Lock became a panic in Do's caller")
		require.False(t, returned, "Do returned after a Goexit in Lock")
	case <-time.After(5 * time.Second):
		t.Fatal("Do's caller neither returned nor exited after a Goexit in Lock")
	}
}
