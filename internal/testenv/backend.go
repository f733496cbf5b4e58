package testenv

import (
	"context"
	"fmt"
	"os"
)

// BackendEnv names the environment variable that selects how the test layer
// runs its servers: "process" (the default, also when empty) starts
// redis-server and postgres as child processes; "docker" starts containers
// through dockertest from the images that `make images` builds (or the
// official ones). The plain layer is not affected.
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

// RedisServer is a Redis node under a test's control, whichever backend runs
// it: a *RedisProcess or a *RedisContainer. Addresses and ports stay the same
// across Kill and Restart in both.
type RedisServer interface {
	Addr() string
	Port() int
	// Dir and LogPath name host paths for processes; containers keep their
	// data and output inside Docker and return "".
	Dir() string
	LogPath() string
	// PID is the host pid of the server (of the container's main process
	// for containers), or 0 once stopped.
	PID() int
	Pause() error
	Resume() error
	Kill() error
	Restart(ctx context.Context) error
	Stop() error
}

// postgresServer is what the shared test server needs from either backend.
type postgresServer interface {
	DSN(db string) string
	CreateDatabase(ctx context.Context, name string) error
	DropDatabase(ctx context.Context, name string) error
	Stop() error
}

var (
	_ RedisServer    = (*RedisProcess)(nil)
	_ RedisServer    = (*RedisContainer)(nil)
	_ postgresServer = (*PostgresProcess)(nil)
	_ postgresServer = (*PostgresContainer)(nil)
)

// startSharedPostgres starts the shared server on the selected backend. It
// returns a nil interface on failure, never a typed nil.
func startSharedPostgres(ctx context.Context) (postgresServer, error) {
	backend, err := SelectedBackend()
	if err != nil {
		return nil, err
	}
	if backend == BackendDocker {
		c, err := StartPostgresContainer(ctx, PostgresContainerConfig{})
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	p, err := StartPostgresProcess(ctx, PostgresConfig{})
	if err != nil {
		return nil, err
	}
	return p, nil
}
