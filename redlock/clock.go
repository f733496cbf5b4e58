package redlock

import "time"

// Clock is the time source of a Client (WithClock). Now must carry a monotonic
// reading (as time.Now does) or otherwise never step backwards; durations
// are measured as differences of Now values, so a step of the wall clock
// changes nothing.
//
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer a Clock hands out.
type Timer interface {
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// systemClock is the process clock, the default: time.Now and
// time.AfterFunc.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
