package servers

import "context"

// RedisServer is a Redis node under the caller's control, whichever way it
// runs: a *RedisProcess or a *RedisContainer. Addresses and ports stay the
// same across Kill and Restart in both.
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

var (
	_ RedisServer = (*RedisProcess)(nil)
	_ RedisServer = (*RedisContainer)(nil)
)
