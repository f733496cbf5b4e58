//go:build unix

package chaos

import "golang.org/x/sys/unix"

// stampNs is the time the suite records a run's events at, in
// nanoseconds: the machine's CLOCK_MONOTONIC, which every process on it
// shares and which a step of the wall clock (an NTP correction, a virtual
// machine's resync) does not move. Wall-clock stamps made such a step
// look like a lease valid for seconds: a 7 s step during a soak turned a
// 200 ms lease into a 7.5 s window on paper. Redis still expires keys by
// its wall clock; that is the clock-jump fault's business.
func stampNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("chaos: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
