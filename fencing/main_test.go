package fencing_test

import (
	"os"
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestMain stops the shared PostgreSQL, then checks for leaked goroutines.
func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }
