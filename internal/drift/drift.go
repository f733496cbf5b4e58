package drift

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DefaultFactor is the clock-rate error the validity computation allows for
// unless a client is configured otherwise: 1%, as in the Redlock description.
const DefaultFactor = 0.01

// Resolution is the fixed part of the drift: Redis expires keys with 1 ms
// resolution, plus 1 ms of minimum drift so that tiny TTLs keep a margin.
const Resolution = 2 * time.Millisecond

// ErrFactor reports a drift factor outside [0, 1).
var ErrFactor = errors.New("drift: factor must be in [0, 1)")

// CheckFactor returns an error wrapping ErrFactor unless 0 <= f < 1.
// NaN and infinities are rejected too.
func CheckFactor(f float64) error {
	if math.IsNaN(f) || f < 0 || f >= 1 {
		return fmt.Errorf("%w: got %v", ErrFactor, f)
	}
	return nil
}

// Drift returns the margin subtracted from a ttl: ttl*factor, rounded up to
// the next nanosecond, plus Resolution. A negative ttl is treated as zero.
// The factor must have passed CheckFactor; Drift does not validate it.
func Drift(ttl time.Duration, factor float64) time.Duration {
	if ttl < 0 {
		ttl = 0
	}
	// Rounding up keeps the margin conservative: a lease may end a
	// nanosecond early, never late.
	return time.Duration(math.Ceil(float64(ttl)*factor)) + Resolution
}

// Validity returns how long a lease stays trustworthy after the moment its
// acquisition round was decided: ttl - elapsed - Drift(ttl, factor). The
// result is <= 0 when the round took too long; such a lease must not be used.
// elapsed must be measured on a monotonic clock (time.Since does that), so
// that a step of the wall clock cannot lengthen a lease.
func Validity(ttl, elapsed time.Duration, factor float64) time.Duration {
	if elapsed < 0 {
		// A monotonic clock cannot run backwards; an injected clock that
		// does must not buy the caller extra validity.
		elapsed = 0
	}
	return ttl - elapsed - Drift(ttl, factor)
}

// MinTTL returns the smallest ttl that can yield a positive validity with
// the given factor: any ttl <= Drift(ttl, factor) is useless and is rejected
// by the lock client before any node is contacted.
func MinTTL(factor float64) time.Duration {
	// ttl > ttl*f + R  <=>  ttl > R/(1-f); the rounding in Drift moves the
	// exact boundary by a few nanoseconds, so settle it by stepping.
	m := time.Duration(float64(Resolution) / (1 - factor))
	for Validity(m, 0, factor) > 0 && m > 0 {
		m--
	}
	for Validity(m, 0, factor) <= 0 {
		m++
	}
	return m
}
