package chaos_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/chaos"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain doubles as the worker program: the suite re-executes this test
// binary with chaos.WorkerEnv set.
func TestMain(m *testing.M) {
	if os.Getenv(chaos.WorkerEnv) != "" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		code := chaos.WorkerMain(ctx, os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	// go-redis logs every failed dial; the faults make many on purpose.
	redis.SetLogger(quietLogger{})
	code := m.Run()
	if code == 0 {
		if err := leftovers(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}
