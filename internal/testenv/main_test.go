package testenv_test

import (
	"os"
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestMain shows the intended use: stop the shared PostgreSQL server after
// the tests, then check that no helper left a goroutine running.
func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }
