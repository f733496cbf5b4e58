package servers

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"
)

// freePort asks the kernel for an unused port. Another process can take it
// before the server binds it, which is why the starters retry on a clash.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("servers: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// portClash reports whether a log says the server could not bind its port.
func portClash(log string) bool {
	return strings.Contains(log, "Address already in use")
}

// startAttempts bounds retries after a port clash on an automatically chosen
// port; a clash on a port the caller named is returned at once.
const startAttempts = 5

// withDefaultTimeout bounds ctx when the caller gave no deadline, so a server
// that never answers cannot hang a test until the global test timeout.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
