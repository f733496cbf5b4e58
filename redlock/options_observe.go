package redlock

import (
	"errors"
	"log/slog"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The options that say where and how a Client reports what it does: logs,
// notices, metrics and spans. Their defaults are set with the others, in
// options.go.

// WithLogger sets where the client logs node failures, quarantines and
// lost leases, and at Debug level each Lock or TryLock (its wait, attempts
// and fencing token) and each Release. Default: nowhere.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("WithLogger: nil logger")
		}
		c.logger = l
		return nil
	})
}

// WithQuarantineNotice sets a function the Client calls once per
// quarantine episode (see QuarantineNotice), as soon as an attempt of
// Lock, TryLock or Do is refused because too few nodes may vote yet: a
// new deployment, or nodes that lost their data. A program can then tell
// its user why it waits, and for about how long, instead of blocking in
// silence. f runs on the attempt's goroutine and must return quickly; it
// must not call the Client. The same event is logged at Warn level
// (WithLogger). Default: none.
func WithQuarantineNotice(f func(QuarantineNotice)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("WithQuarantineNotice: nil function")
		}
		c.onQuarantine = f
		return nil
	})
}

// WithUnavailableNotice sets a function the Client calls once per episode
// in which the lock service cannot grant, as soon as a waiting Lock (or
// Do) is about to wait after an attempt that failed for that reason
// (IsUnavailable: fewer than a majority of nodes answered in time, a round
// too slow for the ttl, a fencing commit that reached too few nodes),
// with that attempt's error (a *NotObtainedError). A program can then say
// that it waits for the lock service, not for another holder. A quarantine
// has WithQuarantineNotice instead. The episode ends when an attempt of
// this Client obtains a lease or finds the key held. f runs on the
// waiting call's goroutine and must return quickly; it must not call the
// Client. The same event is logged at Warn level (WithLogger). Default:
// none.
func WithUnavailableNotice(f func(err error)) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return errors.New("WithUnavailableNotice: nil function")
		}
		c.onUnavailable = f
		return nil
	})
}

// WithMeterProvider sets where the client's OpenTelemetry metrics go
// (acquisitions by outcome, acquire, wait and held durations, extends, lost
// leases, per-node and configuration errors, and gauges of the leases held
// and the nodes in quarantine; docs/operations.md lists them). Default: the
// global provider, a no-op unless the application installed one.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		if mp == nil {
			return errors.New("WithMeterProvider: nil provider")
		}
		c.meters = mp
		return nil
	})
}

// WithTracerProvider sets where the client's OpenTelemetry spans go: one
// per Lock, TryLock, Do, Extend and Release call, with the attempts, their
// per-node answers, the outcome, the wait and the fencing token, and one
// per admission check of a node. Default: no spans, not even through the
// global provider, since a span costs allocations on every call even when
// the provider is a no-op; pass otel.GetTracerProvider() to use the
// global one.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) error {
		if tp == nil {
			return errors.New("WithTracerProvider: nil provider")
		}
		c.tracers = tp
		return nil
	})
}

// WithKeyAttribute adds the lock key to the client's metrics (attribute
// key) and spans (quorumlock.key). Keys can be many (one per entity makes
// one time series per entity) or sensitive, so they are left out by
// default; turn it on for a few well-known keys such as cron jobs'.
// Default: off.
func WithKeyAttribute() Option {
	return optionFunc(func(c *config) error { c.keyAttr = true; return nil })
}
