package redlock

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/internal/labopt"
)

// Option configures a Client. Options are validated by New; an invalid one
// makes New fail rather than run with other settings than asked for.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	factor        float64
	fencing       bool
	retry         func(attempt int) time.Duration
	maxAttempts   int
	clock         Clock
	timeoutFactor float64
	nodeTimeout   time.Duration
	minTimeout    time.Duration
	cleanup       time.Duration
	maxTTL        time.Duration
	quarantine    bool
	maxHold       time.Duration
	logger        *slog.Logger
	wake          bool
	handOff       bool
	probe         time.Duration
	refusalsOK    bool
	meters        metric.MeterProvider
	tracers       trace.TracerProvider
	keyAttr       bool
	onQuarantine  func(QuarantineNotice)
	onUnavailable func(error)
}

// Defaults, in one place.
const (
	DefaultTimeoutFactor  = 0.05                 // per-node timeout: 5% of the ttl ...
	DefaultMinNodeTimeout = 5 * time.Millisecond // ... but at least this
	DefaultCleanupTimeout = 2 * time.Second      // bound on releasing after a failure
	DefaultMaxTTL         = time.Minute          // longest ttl; also the restart quarantine
	DefaultProbeTimeout   = time.Second          // New's duplicate-node check
	DefaultDriftFactor    = drift.DefaultFactor  // clock-rate error allowed for (WithDriftFactor)
)

func defaults() config {
	return config{
		factor:        drift.DefaultFactor,
		retry:         DefaultRetry,
		clock:         systemClock{},
		timeoutFactor: DefaultTimeoutFactor,
		minTimeout:    DefaultMinNodeTimeout,
		cleanup:       DefaultCleanupTimeout,
		maxTTL:        DefaultMaxTTL,
		quarantine:    true,
		logger:        slog.New(slog.DiscardHandler),
		wake:          true,
		probe:         DefaultProbeTimeout,
	}
}

// applyOptions applies opts to cfg and checks the result. Its errors name
// the option and carry no package prefix: New and CheckTTL add theirs
// once.
func applyOptions(cfg *config, opts []Option) error {
	for _, o := range opts {
		if o == nil {
			return errors.New("nil option")
		}
		if err := o.apply(cfg); err != nil {
			return err
		}
	}
	if err := checkMaxTTL(cfg.maxTTL, cfg.factor); err != nil {
		return fmt.Errorf("WithMaxTTL: %w", err)
	}
	return nil
}

// DefaultRetry is Lock's default delay between attempts: uniform in
// [20ms, 100ms), fresh every attempt, so competing clients fall out of step.
// Waiters are normally woken earlier, by the holder's release or by the
// expiry the busy nodes reported.
func DefaultRetry(int) time.Duration {
	return 20*time.Millisecond + rand.N(80*time.Millisecond)
}

// WithFencing makes every lease carry a fencing token (Lease.FencingToken)
// that grows with the order in which holders obtained the lock, at the cost
// of one more parallel round trip per acquisition. Default: off.
func WithFencing() Option {
	return optionFunc(func(c *config) error { c.fencing = true; return nil })
}

// WithDriftFactor sets the clock-rate error allowed for in every validity:
// drift = ttl*f + 2ms. f must be in [0, 1). Default 0.01.
func WithDriftFactor(f float64) Option {
	return optionFunc(func(c *config) error {
		if err := drift.CheckFactor(f); err != nil {
			return fmt.Errorf("WithDriftFactor: %w", err)
		}
		c.factor = f
		return nil
	})
}

// WithRetry sets Lock's retry policy, where delay(attempt) is a cap, not a
// fixed pause: the longest Lock waits after failed attempt number attempt
// (0-based) before the next one. Lock tries sooner when the holder's
// release wakes it or when the nodes reported that the holder's key
// expires sooner, so a policy of a constant 50ms can give up after three
// attempts in far less than 150ms. maxAttempts > 0 bounds the number of
// attempts (0: until ctx ends; 1: one attempt). While the lock service
// cannot grant (IsUnavailable), Lock waits longer than delay: see Lock.
// delay must not be nil and should be random. Default: DefaultRetry,
// unlimited attempts.
func WithRetry(delay func(attempt int) time.Duration, maxAttempts int) Option {
	return optionFunc(func(c *config) error {
		if err := checkRetry(delay, maxAttempts); err != nil {
			return fmt.Errorf("WithRetry: %w", err)
		}
		c.retry, c.maxAttempts = delay, maxAttempts
		return nil
	})
}

// checkRetry is the rule for a retry policy: WithRetry's, and a call's
// WithCallRetry.
func checkRetry(delay func(attempt int) time.Duration, maxAttempts int) error {
	if delay == nil {
		return errors.New("nil delay function")
	}
	if maxAttempts < 0 {
		return fmt.Errorf("maxAttempts %d < 0", maxAttempts)
	}
	return nil
}

// WithClock sets the clock validity is measured on. Its Now must be
// monotonic. Default: the process clock (time.Now, time.AfterFunc).
func WithClock(clk Clock) Option {
	return optionFunc(func(c *config) error {
		if clk == nil {
			return errors.New("WithClock: nil clock")
		}
		c.clock = clk
		return nil
	})
}

// WithNodeTimeout bounds every per-node call of a round by d instead of the
// default of 5% of the ttl (at least 5ms). d must be > 0.
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithNodeTimeout: %v is not positive", d)
		}
		c.nodeTimeout = d
		return nil
	})
}

// WithCleanupTimeout bounds how long releasing after a failed attempt (and
// Release's calls to slow nodes) may run, detached from the caller's ctx.
// d must be > 0. Default 2s.
func WithCleanupTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithCleanupTimeout: %v is not positive", d)
		}
		c.cleanup = d
		return nil
	})
}

// WithMaxTTL sets the longest ttl Lock, TryLock, Do and Extend accept: a
// whole number of milliseconds, at most MaxMaxTTL. It is also the length
// of the restart quarantine: a node that lost its data does not vote until
// MaxTTL plus drift has passed, so it cannot grant a lock that it forgot
// and that may still be live. It is a setting of the deployment, kept on
// its nodes: every client of the nodes must use the same value (and drift
// factor), or the nodes refuse it (ErrConfigMismatch). Default 1 minute.
func WithMaxTTL(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithMaxTTL: %v is not positive", d)
		}
		c.maxTTL = d
		return nil
	})
}

// withoutRestartQuarantine lets a node that restarted empty vote at once.
// This is unsafe (a restarted node can grant a lock that is still held)
// and exists to measure what the quarantine buys, so it is not exported:
// the chaos suite and the tests reach it through internal/labopt.
func withoutRestartQuarantine() Option {
	return optionFunc(func(c *config) error { c.quarantine = false; return nil })
}

func init() {
	labopt.WithoutRestartQuarantine = withoutRestartQuarantine
}

// WithMaxHold makes Do stop extending a lease once it has been held for d,
// so a hung fn cannot keep the lock forever; fn's ctx is then cancelled at
// the end of the last validity. It bounds Lease.KeepRenewed the same way,
// from when KeepRenewed was called. d must be > 0. Default: no cap.
func WithMaxHold(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithMaxHold: %v is not positive", d)
		}
		c.maxHold = d
		return nil
	})
}

// WithKeyHandOff makes a release hand the free key to the first Lock call
// in line itself (see Client.Lock): the key is set to the call's id with
// its ttl, and the call holds the lock once a majority of nodes told it
// so, with no acquire round of its own. A hand-off between processes then
// costs one round less, and the releaser cannot take the key back past the
// waiter. The price: a waiter that is frozen (a stopped process, a long
// pause, a link that drops its packets) when a release hands it the key
// holds the key up until it wakes or its ttl runs out, as a frozen holder
// does, where without this option a release only keeps the key free for
// the first in line for one short reservation. A waiter whose process has
// exited is passed over. It applies to Lock calls without fencing; with
// WithFencing or WithoutReleaseNotify it has no effect, and a call with
// Fenced is not handed keys either. Default: off.
func WithKeyHandOff() Option {
	return optionFunc(func(c *config) error { c.handOff = true; return nil })
}

// WithoutReleaseNotify turns off waking Lock's waiters through Pub/Sub when
// a holder releases; waiters then only poll per the retry policy.
// Default: notify on.
func WithoutReleaseNotify() Option {
	return optionFunc(func(c *config) error { c.wake = false; return nil })
}

// WithProbeTimeout bounds New's check of the nodes (that no two entries
// reach the same Redis server, that each is a primary that accepts this
// client): New waits up to d for a majority to answer, and 50 ms more for
// the rest; nodes that do not answer by then are checked when they first
// answer. It also bounds the background PING that sets a connection up
// again after a call to a node ran out of time (see the package doc). With
// ContextTimeoutEnabled node clients, it bounds how long Close can wait for
// a probe call or such a PING to a frozen node. d must be > 0.
// Default 1s.
func WithProbeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("WithProbeTimeout: %v is not positive", d)
		}
		c.probe = d
		return nil
	})
}

// WithoutRefusalCheck keeps New from failing when so many nodes refuse
// this client at its startup probe (ErrNodeRefused: a wrong password, an
// ACL that denies the scripts, a database the node lacks) that fewer than
// a majority are left: those nodes then fail every call, as ones that
// start refusing later do. Nor does New fail for a node that cannot be a
// Redlock node (a replica, cluster mode, a Redis older than 5.0): it gets
// a Warn, and Client.Check reports it. For tools that report on a
// deployment whatever its state (quorumlock status, quorumlock check); a
// service should let New fail. Default: New fails; a refusing minority is
// a Warn per node either way.
func WithoutRefusalCheck() Option {
	return optionFunc(func(c *config) error { c.refusalsOK = true; return nil })
}
