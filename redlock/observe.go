package redlock

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Traces, acquisition logs, and the notices that a quarantine or an
// unavailable lock service is why locks are refused (noticeQuarantine,
// noticeUnavailable; QuarantineNotice is quarantine_notice.go). The
// metrics are in metrics.go; both are documented for users in
// docs/operations.md ("What to monitor").
//
// Spans are off unless WithTracerProvider names a provider. OpenTelemetry's
// instrumentation libraries (otelhttp, go-redis's redisotel, otelpgx) use
// the global provider by default instead, but a span costs allocations
// even when that provider is the no-op one (a context and a boxed span per
// span: about 6 more per Lock+Release, measured with BenchmarkLockRelease),
// and the hot path is measured against redsync's allocations. An
// application that wants the global provider passes
// WithTracerProvider(otel.GetTracerProvider()). Attributes are built only
// for recording spans, and the Debug logs' arguments only when Debug is
// enabled, so neither costs anything per attempt otherwise.

const tracerName = "github.com/quorumlock/quorumlock/redlock"

// Span and event attribute keys.
var (
	attrKey       = attribute.Key("quorumlock.key")
	attrTTL       = attribute.Key("quorumlock.ttl_ms")
	attrOutcome   = attribute.Key("quorumlock.outcome")
	attrAttempts  = attribute.Key("quorumlock.attempts")
	attrWait      = attribute.Key("quorumlock.wait_ms")
	attrToken     = attribute.Key("quorumlock.fencing_token")
	attrGranted   = attribute.Key("quorumlock.granted")
	attrElapsed   = attribute.Key("quorumlock.elapsed_ms")
	attrNodes     = attribute.Key("quorumlock.nodes")
	attrNode      = attribute.Key("quorumlock.node")
	attrAddr      = attribute.Key("quorumlock.node.addr")
	attrLeft      = attribute.Key("quorumlock.quarantine_left_ms")
	attrHeld      = attribute.Key("quorumlock.held_ms")
	attrConfigErr = attribute.Key("quorumlock.config_error")
)

// noSpan is the span of calls without a tracer: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(tracerName)
}

// debug reports whether the logger takes Debug records.
func (c *Client) debug(ctx context.Context) bool {
	return c.cfg.logger.Enabled(ctx, slog.LevelDebug)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startSpan starts the span of a public call on key. The key is an
// attribute only with WithKeyAttribute.
func (c *Client) startSpan(ctx context.Context, name, key string, ttl time.Duration) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, noSpan
	}
	ctx, span := c.tracer.Start(ctx, name)
	if span.IsRecording() {
		if c.cfg.keyAttr {
			span.SetAttributes(attrKey.String(key))
		}
		if ttl > 0 {
			span.SetAttributes(attrTTL.Int64(ttl.Milliseconds()))
		}
	}
	return ctx, span
}

// endSpan ends span with err's status.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// acquisition follows one Lock or TryLock call: its span, its wait and,
// when a span records or Debug logs are on, its attempts.
type acquisition struct {
	c     *Client
	span  trace.Span
	key   string
	start time.Time
	tries *tries // nil: nobody reads the attempts
}

// tries travels in the ctx of a Lock or TryLock call, so that each attempt
// (try) can count itself and add its event to the span. A call's attempts
// run one after another, never at once.
type tries struct {
	span trace.Span // nil unless recording
	n    int
}

type triesKey struct{}

// startAcquisition starts following a Lock ("quorumlock.Lock") or TryLock
// ("quorumlock.TryLock") call.
func (c *Client) startAcquisition(ctx context.Context, name, key string, ttl time.Duration) (context.Context, acquisition) {
	ctx, span := c.startSpan(ctx, name, key, ttl)
	acq := acquisition{c: c, span: span, key: key, start: c.cfg.clock.Now()}
	if rec := span.IsRecording(); rec || c.debug(ctx) {
		acq.tries = &tries{}
		if rec {
			acq.tries.span = span
		}
		ctx = context.WithValue(ctx, triesKey{}, acq.tries)
	}
	return ctx, acq
}

// outcomeOf names how an acquisition ended, as the outcome attribute of
// the metrics and spans: obtained, a Reason, config, closed or invalid.
func outcomeOf(err error) string {
	if err == nil {
		return "obtained" // before the errors.As target below, which is on the heap
	}
	var ne *NotObtainedError
	switch {
	case errors.As(err, &ne):
		return string(ne.Reason)
	case errors.Is(err, ErrClosed):
		return "closed"
	case configErrorKind(err) != "":
		return "config"
	}
	return "invalid"
}

// end records how the call ended: the wait (except for input errors,
// which touch no node), the span's attributes, a configuration error, and
// a Debug log line.
func (a *acquisition) end(l *Lease, err error) {
	c := a.c
	wait := c.cfg.clock.Now().Sub(a.start)
	outcome := outcomeOf(err)
	if outcome != "invalid" {
		c.inst.wait(outcome, a.key, wait)
	}
	c.countConfigError(err)
	if a.tries == nil {
		endSpan(a.span, err)
		return
	}
	n := a.tries.n
	if a.span.IsRecording() {
		a.span.SetAttributes(attrOutcome.String(outcome), attrAttempts.Int(n), attrWait.Float64(ms(wait)))
		if l != nil && l.token != 0 {
			a.span.SetAttributes(attrToken.Int64(int64(l.token)))
		}
	}
	if l != nil {
		c.cfg.logger.Debug("redlock: lock obtained", "key", a.key, "wait", wait, "attempts", n, "token", l.token)
	} else {
		c.cfg.logger.Debug("redlock: lock not obtained", "key", a.key, "wait", wait, "attempts", n, "outcome", outcome)
	}
	endSpan(a.span, err)
}

// tried counts attempt a of the call followed in ctx, if anyone reads the
// count, and adds its event to the call's span: its outcome, how many
// nodes granted, how long it took, and each node's answer (by index, as in
// NodeError.Node).
func (c *Client) tried(ctx context.Context, a *attempt, outcome string) {
	t, _ := ctx.Value(triesKey{}).(*tries)
	if t == nil {
		return
	}
	t.n++
	if t.span == nil {
		return
	}
	t.span.AddEvent("attempt", trace.WithAttributes(
		attrOutcome.String(outcome),
		attrGranted.Int(a.granted),
		attrElapsed.Float64(ms(a.elapsed)),
		attrNodes.StringSlice(a.nodeAnswers()),
	))
}

// configErrorKind names the kind of configuration error err carries, for
// the quorumlock.config.errors counter and the spans, or "" when it is
// none. A new kind of configuration error is one case here.
func configErrorKind(err error) string {
	if err == nil {
		return ""
	}
	var ce *ConfigError
	var dup *DuplicateNodeError
	switch {
	case errors.As(err, &ce):
		return "settings"
	case errors.As(err, &dup):
		return "duplicate_node"
	case errors.Is(err, ErrNodeRefused) && errors.Is(err, ErrConfigMismatch):
		// Nodes that refuse the client (credentials, ACL, database) were
		// why the call failed (see ReasonRefused).
		return "refused"
	}
	return ""
}

// countConfigError counts err in quorumlock.config.errors if it is a
// configuration error. Every call that returns one to a caller passes its
// error here once.
func (c *Client) countConfigError(err error) {
	if kind := configErrorKind(err); kind != "" {
		c.inst.configError(kind)
	}
}

// releaseOutcome is the quorumlock.outcome of a Release span: released,
// unconfirmed (ErrReleaseUnconfirmed), not_held (ErrNotHeld) or error.
func releaseOutcome(err error) string {
	switch {
	case err == nil:
		return "released"
	case errors.Is(err, ErrReleaseUnconfirmed):
		return "unconfirmed"
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	}
	return "error"
}

// extendOutcome is the quorumlock.outcome of an Extend span, as the
// quorumlock.extends metric counts it: ok, lost (ErrNotHeld), invalid (a
// bad ttl: nothing sent) or error.
func extendOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotHeld):
		return "lost"
	case errors.Is(err, ErrInvalidTTL):
		return "invalid"
	}
	return "error"
}

// extendEnded ends Extend's span with its outcome.
func extendEnded(span trace.Span, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(extendOutcome(err)))
	}
	endSpan(span, err)
}

// doEnded ends Do's span. outcome is ok, error (fn failed), lost (the
// lease ended before fn returned) or the outcome of a Lock that failed.
func doEnded(span trace.Span, outcome string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome))
	}
	endSpan(span, err)
}

// noticeQuarantine reports the attempt refused with e (ReasonQuarantine)
// to the log and to WithQuarantineNotice's function, unless this episode
// was reported already. An episode lasts until the quarantine that was
// reported should have ended (one full quarantine when its end is
// unknown); a refusal after that is a new one, except one that finds
// the quarantine over (e.Wait = 0) within one more quarantine: that is
// the reported episode's end, whose admission an attempt has not made
// yet (it missed its node timeout on a busy host, say). A new episode
// has time left, unless the attempt could not read it; such a refusal
// this close to the last episode goes unreported (only the notice: the
// refusal itself is returned as ever).
func (c *Client) noticeQuarantine(e *NotObtainedError) {
	now := c.cfg.clock.Now()
	span := e.Wait
	if span <= 0 {
		span = c.dep.quarantine()
	}
	c.notices.mu.Lock()
	if now.Before(c.notices.until) ||
		e.Wait <= 0 && !c.notices.until.IsZero() && now.Before(c.notices.until.Add(c.dep.quarantine())) {
		c.notices.mu.Unlock()
		return
	}
	c.notices.until = now.Add(span)
	c.notices.mu.Unlock()
	n := QuarantineNotice{Key: e.Key, Quarantined: quarantined(e), HeldOff: heldOff(e), Nodes: e.Nodes, Left: e.Wait}
	if n.Reconfiguring() {
		c.cfg.logger.Warn("redlock: locks are refused until the hold-off of a reconfiguration to this client's settings ends; the nodes admit themselves then",
			"key", keyText(n.Key), "held_off_at_least", n.HeldOff, "nodes", n.Nodes, "left", n.Left)
	} else {
		c.cfg.logger.Warn("redlock: locks are refused until the nodes' restart quarantine ends (they are new or lost their data); they admit themselves then",
			"key", keyText(n.Key), "quarantined_at_least", n.Quarantined, "held_off_at_least", n.HeldOff, "nodes", n.Nodes, "left", n.Left)
	}
	if c.cfg.onQuarantine != nil {
		c.cfg.onQuarantine(n)
	}
}

// noticeUnavailable reports a waiting call's attempt that failed because
// the lock service could not grant (err, IsUnavailable) to the log and to
// WithUnavailableNotice's function, once per episode of this Client: the
// episode ends when one of its attempts (TryLock's too) obtains a lease or
// finds the key held, or a release hands it one (serviceAnswered). A
// quarantine has a notice of its own (noticeQuarantine).
func (c *Client) noticeUnavailable(err error) {
	var e *NotObtainedError
	if !errors.As(err, &e) || e.Reason == ReasonQuarantine || !c.unavailableSaid.CompareAndSwap(false, true) {
		return
	}
	c.cfg.logger.Warn("redlock: the lock service cannot grant the lock now; waiting, with attempts backing off up to 1 s apart",
		"key", keyText(e.Key), "reason", string(e.Reason), "detail", e.Detail)
	if c.cfg.onUnavailable != nil {
		// A copy: the call goes on with e, and its final error is built
		// from the last attempt's (see Client.stopped), which f may keep.
		cp := *e
		c.cfg.onUnavailable(&cp)
	}
}

// serviceAnswered ends the current unavailability episode (see
// noticeUnavailable).
func (c *Client) serviceAnswered() {
	if c.unavailableSaid.Load() {
		c.unavailableSaid.Store(false)
	}
}
