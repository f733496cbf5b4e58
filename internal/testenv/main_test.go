package testenv_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestMain shows the intended use: stop the shared PostgreSQL server after
// the tests, then check that no helper left a goroutine running.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := testenv.Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv.Shutdown:", err)
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
