package fencing_test

import (
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// newDSN returns the DSN of a fresh, empty database on the test binary's
// shared PostgreSQL server; testenv drops it when t ends.
func newDSN(t testing.TB) string {
	t.Helper()
	return testenv.Postgres(t).NewDatabase(t)
}
