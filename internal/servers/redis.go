package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Persistence selects how a Redis node keeps data across a restart.
type Persistence int

const (
	// PersistenceNone disables RDB snapshots and the AOF: a restarted node
	// comes back empty, like a primary that lost its memory.
	PersistenceNone Persistence = iota
	// PersistenceAOFAlways appends every write to the AOF and fsyncs it
	// before replying, so a SIGKILL loses nothing that was acknowledged.
	PersistenceAOFAlways
)

func (p Persistence) String() string {
	switch p {
	case PersistenceNone:
		return "none"
	case PersistenceAOFAlways:
		return "aof-always"
	default:
		return "Persistence(" + strconv.Itoa(int(p)) + ")"
	}
}

func (p Persistence) args() ([]string, error) {
	switch p {
	case PersistenceNone:
		return []string{"--save", "", "--appendonly", "no"}, nil
	case PersistenceAOFAlways:
		return []string{"--save", "", "--appendonly", "yes", "--appendfsync", "always"}, nil
	default:
		return nil, fmt.Errorf("servers: unknown persistence %d", int(p))
	}
}

// RedisConfig describes one redis-server. The zero value is a node on a free
// port in a fresh temporary directory, without persistence.
type RedisConfig struct {
	// Binary is the redis-server program to run: a path, or a name looked
	// up on PATH. Empty means "redis-server" on PATH.
	Binary string
	// Port to listen on; 0 picks a free one (and retries on a clash).
	Port int
	// Dir holds the log and any persisted data; empty means a temporary
	// directory that Stop removes.
	Dir         string
	Persistence Persistence
	// ExtraArgs are appended to the command line, so they override the
	// defaults (for example "--maxmemory-policy", "allkeys-lru").
	ExtraArgs []string
	// Env is appended to the server's environment, for example an
	// LD_PRELOAD that shifts the server's clock.
	Env []string
	// TLS, when set, makes the node speak TLS only: Port is its TLS port
	// and the plain port is closed (--port 0). Default: plain TCP.
	TLS *RedisTLS
}

// RedisProcess is a redis-server running as a child of this process. Its
// methods are safe for concurrent use.
type RedisProcess struct {
	bin     string
	cfg     RedisConfig // Port and Dir are resolved
	ownsDir bool

	mu      sync.Mutex
	c       *child // nil after Stop
	stopped bool
}

const redisStartTimeout = 15 * time.Second

// StartRedisProcess starts redis-server in the foreground and returns once it
// answers PING. ctx bounds the start only (15s when it has no deadline); the
// server runs until Kill or Stop. On failure nothing is left running and the
// error carries the end of the server's log.
func StartRedisProcess(ctx context.Context, cfg RedisConfig) (*RedisProcess, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("servers: invalid redis port %d", cfg.Port)
	}
	if _, err := cfg.Persistence.args(); err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		if _, err := cfg.TLS.args(cfg.Port); err != nil {
			return nil, err
		}
	}
	name := cfg.Binary
	if name == "" {
		name = "redis-server"
	}
	bin, err := lookBinary(name)
	if err != nil {
		return nil, err
	}
	r := &RedisProcess{bin: bin, cfg: cfg}
	if r.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "quorumlock-redis-")
		if err != nil {
			return nil, fmt.Errorf("servers: redis dir: %w", err)
		}
		r.cfg.Dir, r.ownsDir = d, true
	} else if err := os.MkdirAll(r.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: redis dir: %w", err)
	}

	ctx, cancel := withDefaultTimeout(ctx, redisStartTimeout)
	defer cancel()
	autoPort := cfg.Port == 0
	for attempt := 1; ; attempt++ {
		if autoPort {
			if r.cfg.Port, err = freePort(); err != nil {
				break
			}
		}
		var clash bool
		r.c, clash, err = r.start(ctx)
		if err == nil || !clash || !autoPort || attempt == startAttempts {
			break
		}
	}
	if err != nil {
		if r.ownsDir {
			_ = os.RemoveAll(r.cfg.Dir)
		}
		return nil, err
	}
	return r, nil
}

// start launches one server process and waits for PING. clash reports a
// failure to bind the port.
func (r *RedisProcess) start(ctx context.Context) (c *child, clash bool, err error) {
	persist, _ := r.cfg.Persistence.args()
	args := []string{
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(r.cfg.Port),
		"--dir", r.cfg.Dir,
		"--daemonize", "no",
		"--logfile", "",
		"--maxmemory-policy", "noeviction",
		"--protected-mode", "no",
	}
	if r.cfg.TLS != nil {
		tlsArgs, err := r.cfg.TLS.args(r.cfg.Port)
		if err != nil {
			return nil, false, err
		}
		args = append(args, tlsArgs...) // a later --port overrides the one above
	}
	args = append(args, persist...)
	args = append(args, r.cfg.ExtraArgs...)
	c, err = startChild(childSpec{
		path:    r.bin,
		args:    args,
		env:     r.cfg.Env,
		dir:     r.cfg.Dir,
		logPath: filepath.Join(r.cfg.Dir, "redis.log"),
	})
	if err != nil {
		return nil, false, err
	}
	if err := waitRedisReady(ctx, c, r.Addr(), r.cfg.TLS.probe()); err != nil {
		_ = c.kill()
		return nil, portClash(c.logTail(4096)), c.startupError("redis-server on "+r.Addr(), err)
	}
	return c, false, nil
}

// Addr returns "127.0.0.1:PORT"; it stays the same across restarts.
func (r *RedisProcess) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.cfg.Port))
}

// Port returns the TCP port; it stays the same across restarts.
func (r *RedisProcess) Port() int { return r.cfg.Port }

// Dir returns the directory holding the log and persisted data.
func (r *RedisProcess) Dir() string { return r.cfg.Dir }

// LogPath returns the file the server's output is appended to, across
// restarts.
func (r *RedisProcess) LogPath() string { return filepath.Join(r.cfg.Dir, "redis.log") }

// PID returns the pid of the current server process, or 0 after Stop. After
// Restart it is a different pid.
func (r *RedisProcess) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return 0
	}
	return r.c.pid()
}

// Pause freezes the node with SIGSTOP: connections stay open and requests
// hang, as with a long GC pause or a stalled VM. It fails if the node is not
// running.
func (r *RedisProcess) Pause() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return errors.New("servers: redis process was stopped")
	}
	if err := r.c.pause(); err != nil {
		return fmt.Errorf("servers: SIGSTOP to redis %s: %w", r.Addr(), err)
	}
	return nil
}

// Resume undoes Pause with SIGCONT. It fails if the node is not running.
func (r *RedisProcess) Resume() error { return r.signal(syscall.SIGCONT) }

func (r *RedisProcess) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return errors.New("servers: redis process was stopped")
	}
	if err := r.c.signalGroup(sig); err != nil {
		return fmt.Errorf("servers: %v to redis %s: %w", sig, r.Addr(), err)
	}
	return nil
}

// Kill ends the node with SIGKILL, a crash without a clean shutdown, and
// waits until it has exited. Killing a node that already exited is not an
// error; Restart brings it back.
func (r *RedisProcess) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.c == nil {
		return errors.New("servers: redis process was stopped")
	}
	return r.c.kill()
}

// Restart starts the node again on the same port and directory, killing it
// first if it still runs. With PersistenceNone it comes back empty; with
// PersistenceAOFAlways it comes back with every acknowledged write. It
// returns once PING answers, or an error with the log tail (for example when
// another process took the port meanwhile).
func (r *RedisProcess) Restart(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("servers: redis process was stopped")
	}
	if err := r.c.kill(); err != nil {
		return err
	}
	ctx, cancel := withDefaultTimeout(ctx, redisStartTimeout)
	defer cancel()
	c, _, err := r.start(ctx)
	if err != nil {
		return err
	}
	r.c = c
	return nil
}

// Stop shuts the node down for good (SIGCONT, then SIGTERM, then SIGKILL
// after 10s) and removes the directory if StartRedisProcess created it. It is
// idempotent and succeeds if the node already died.
func (r *RedisProcess) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return nil
	}
	r.stopped = true
	err := r.c.stop(syscall.SIGTERM, 10*time.Second)
	r.c = nil
	if r.ownsDir {
		err = errors.Join(err, os.RemoveAll(r.cfg.Dir))
	}
	return err
}
