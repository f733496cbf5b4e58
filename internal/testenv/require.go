package testenv

import (
	"errors"
	"os"
	"testing"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// backendsRequired reports whether a missing backend must fail the test
// rather than skip it. CI sets CI=true; a developer who wants the same
// guarantee locally sets QUORUMLOCK_REQUIRE_BACKENDS=1.
func backendsRequired() bool {
	return os.Getenv("CI") == "true" || os.Getenv("QUORUMLOCK_REQUIRE_BACKENDS") == "1"
}

// RequireBinaries skips the test when one of the named programs cannot be
// found, or fails it when backends are required (CI=true or
// QUORUMLOCK_REQUIRE_BACKENDS=1). "initdb" and "postgres" are also looked for
// where Debian installs them off PATH.
func RequireBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := servers.FindBinary(name); err != nil {
			missingBackend(t, err)
		}
	}
}

// missingBackend ends the test for err: a skip when the binary is missing and
// backends are optional, a failure otherwise.
func missingBackend(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, servers.ErrBinaryNotFound) {
		t.Fatal(err)
	}
	if backendsRequired() {
		t.Fatalf("%v (backends are required because CI=true or QUORUMLOCK_REQUIRE_BACKENDS=1; install redis-server, postgresql and etcd-server)", err)
	}
	t.Skipf("%v (set CI=true or QUORUMLOCK_REQUIRE_BACKENDS=1 to make this a failure)", err)
}
