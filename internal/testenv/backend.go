package testenv

import (
	"context"
	"fmt"
	"os"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// BackendEnv names the environment variable that selects how the test layer
// runs its servers: "process" (the default, also when empty) starts
// redis-server and postgres as child processes; "docker" starts containers
// (package servers) from the images that `make images` builds (or the
// official ones). Package servers is not affected.
const BackendEnv = "QUORUMLOCK_TEST_BACKEND"

// Backend names accepted in BackendEnv.
const (
	BackendProcess = "process"
	BackendDocker  = "docker"
)

// SelectedBackend returns the backend BackendEnv asks for, or an error for
// a value it does not know: a typo must not silently run the other backend.
func SelectedBackend() (string, error) {
	switch v := os.Getenv(BackendEnv); v {
	case "", BackendProcess:
		return BackendProcess, nil
	case BackendDocker:
		return BackendDocker, nil
	default:
		return "", fmt.Errorf("testenv: %s=%q: want %q or %q", BackendEnv, v, BackendProcess, BackendDocker)
	}
}

// postgresServer is what the shared test server needs from either backend.
type postgresServer interface {
	DSN(db string) string
	CreateDatabase(ctx context.Context, name string) error
	DropDatabase(ctx context.Context, name string) error
	Stop() error
}

var (
	_ postgresServer = (*servers.PostgresProcess)(nil)
	_ postgresServer = (*servers.PostgresContainer)(nil)
)

// startSharedPostgres starts the shared server on the selected backend. It
// returns a nil interface on failure, never a typed nil.
func startSharedPostgres(ctx context.Context) (postgresServer, error) {
	backend, err := SelectedBackend()
	if err != nil {
		return nil, err
	}
	if backend == BackendDocker {
		c, err := servers.StartPostgresContainer(ctx, servers.PostgresContainerConfig{})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	p, err := servers.StartPostgresProcess(ctx, servers.PostgresConfig{})
	if err != nil {
		return nil, err
	}
	return p, nil
}
