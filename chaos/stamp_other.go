//go:build !unix

package chaos

import "time"

// stampNs falls back to the wall clock where CLOCK_MONOTONIC cannot be
// read (see stamp_unix.go).
func stampNs() int64 { return time.Now().UnixNano() }
