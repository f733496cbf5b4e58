package fencing_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// Stop the shared PostgreSQL first: its reaper goroutine lives until then.
	if err := testenv.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
