package redlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// What a call is given besides its ctx and ttl: its key, checked before
// any node is contacted (the ttl is checked against the Client's settings:
// Client.checkTTL), and its CallOptions.

// CallOption configures one Lock, TryLock, Do or TryDo call (or a
// LockAll, TryLockAll or DoAll call, for each of its keys), on top of the
// Client's options. Options are validated before any node is touched; an
// invalid one makes the call fail rather than run with other settings than
// asked for.
type CallOption interface{ applyCall(*callConfig) error }

type callOptionFunc func(*callConfig) error

func (f callOptionFunc) applyCall(c *callConfig) error { return f(c) }

// callConfig is one call's settings: the Client's, overridden by the
// call's options.
type callConfig struct {
	retry       func(attempt int) time.Duration
	maxAttempts int
	retrySet    bool          // WithCallRetry was given
	wait        time.Duration // with waitSet: how long the acquisition may take; 0: one attempt
	waitSet     bool
	meta        string
	fenced      bool
}

// callArgs is what a call's attempts carry besides the key: copied into
// each attempt, so that a call's settings stay on its stack.
type callArgs struct {
	meta   string
	fenced bool
}

// MaxMetadata is the largest metadata (in bytes) WithMetadata accepts.
const MaxMetadata = 1024

// ErrMetadataTooLarge is the input error of a call whose WithMetadata is
// longer than MaxMetadata bytes. The call touches no node.
var ErrMetadataTooLarge = fmt.Errorf("redlock: metadata longer than %d bytes", MaxMetadata)

// applyCall applies opts to cc. Apart from callConfig, so that a call
// without options does not allocate its settings: an option's method
// takes them by pointer through an interface.
func applyCall(cc callConfig, opts []CallOption) (callConfig, error) {
	for _, o := range opts {
		if o == nil {
			return cc, errors.New("redlock: nil CallOption")
		}
		if err := o.applyCall(&cc); err != nil {
			return cc, err
		}
	}
	return cc, nil
}

// onlyOnce is the error of options that only a waiting call uses, given
// to call, which makes one attempt: a bound or policy it would ignore.
func (cc *callConfig) onlyOnce(call string) error {
	if (cc.waitSet && cc.wait > 0) || cc.retrySet {
		return fmt.Errorf("redlock: %s makes one attempt: WaitAtMost above 0 and WithCallRetry are for Lock and Do", call)
	}
	return nil
}

// tryOnce reports whether the call makes a single attempt.
func (cc *callConfig) tryOnce() bool { return cc.waitSet && cc.wait == 0 }

// WaitAtMost bounds how long Lock or Do waits for the lock: it starts
// attempts until d has passed since the call began, then returns the last
// attempt's error (errors.Is ErrNotObtained). An attempt under way when d
// passes is not cut short: it ends within its node timeouts, and its lease
// is returned if it won. d = 0 makes one attempt, as TryLock does. The bound applies to the acquisition only: it is not a
// deadline of the caller's ctx, so Do's fn, once running, is not cut short
// by it. d must be >= 0. Default: wait until the lock is obtained, ctx
// ends, or the retry policy gives up.
func WaitAtMost(d time.Duration) CallOption {
	return callOptionFunc(func(c *callConfig) error {
		if d < 0 {
			return fmt.Errorf("redlock: WaitAtMost: %v < 0", d)
		}
		c.wait, c.waitSet = d, true
		return nil
	})
}

// WithCallRetry sets this call's retry policy, in place of the Client's
// (WithRetry): delay(attempt) is the longest wait after failed attempt
// number attempt (0-based), and maxAttempts > 0 bounds the number of
// attempts (0: no bound). delay must not be nil. Default: the Client's
// policy.
func WithCallRetry(delay func(attempt int) time.Duration, maxAttempts int) CallOption {
	return callOptionFunc(func(c *callConfig) error {
		if err := checkRetry(delay, maxAttempts); err != nil {
			return fmt.Errorf("redlock: WithCallRetry: %w", err)
		}
		c.retry, c.maxAttempts, c.retrySet = delay, maxAttempts, true
		return nil
	})
}

// Fenced makes this call's lease carry a fencing token
// (Lease.FencingToken), as WithFencing does for every call of a Client, at
// the cost of one more round trip: one Client can serve fenced and
// unfenced keys. A fenced Lock call is never handed the key by a release
// (WithKeyHandOff): it waits for a reservation and takes the key with an
// attempt of its own, whose commit round mints the token. Default: the
// Client's WithFencing.
func Fenced() CallOption {
	return callOptionFunc(func(c *callConfig) error { c.fenced = true; return nil })
}

// WithMetadata stores md with the lock on every node that grants it, for
// as long as the lease lives: extends keep it, Release deletes it, and a
// hand-off to a waiting Lock call (WithKeyHandOff) carries that call's own
// metadata instead. Client.Inspect and Lease.Metadata return it; it says
// who holds the lock (a host, a pid, a job) and plays no part in deciding
// it. md is at most MaxMetadata bytes (longer is an error wrapping
// ErrMetadataTooLarge that touches no node). Default: none.
func WithMetadata(md string) CallOption {
	return callOptionFunc(func(c *callConfig) error {
		if len(md) > MaxMetadata {
			return fmt.Errorf("%w: WithMetadata got %d bytes", ErrMetadataTooLarge, len(md))
		}
		c.meta = md
		return nil
	})
}

// checkKey refuses a key no call accepts (an *InputError, ErrInvalidKey).
func checkKey(key string) error {
	switch {
	case key == "":
		return &InputError{Arg: "key", Reason: "empty key"}
	case script.Reserved(key):
		return &InputError{Arg: "key", Key: key,
			Reason: fmt.Sprintf("key %s is in quorumlock's own namespace (%q...)", keyText(key), script.Prefix)}
	}
	return nil
}

// CheckKey reports whether Lock, TryLock, Do and Inspect accept key: not
// empty, and not in quorumlock's own namespace (keys starting with
// "quorumlock:"). It contacts no node; tools use it to refuse a bad key
// before they start anything. A refusal is an *InputError (ErrInvalidKey).
func CheckKey(key string) error { return checkKey(key) }

// CheckTTL reports whether a Client built with opts would accept ttl for
// Lock, TryLock, Do and Extend, without building one or contacting any
// node: tools use it to refuse bad input before they start anything. It
// also returns the options' own errors. A refused ttl is an *InputError
// (ErrInvalidTTL).
func CheckTTL(ttl time.Duration, opts ...Option) error {
	cfg := defaults()
	if err := applyOptions(&cfg, opts); err != nil {
		return fmt.Errorf("redlock: %w", err)
	}
	return (&Client{cfg: cfg}).checkTTL(ttl)
}
