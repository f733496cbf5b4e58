package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// RedisContainer is a redis-server in a Docker container, published on a
// fixed port of 127.0.0.1. It offers what RedisProcess offers, with these
// differences: the server listens on all addresses inside the container (the
// host side is bound to 127.0.0.1); Pause freezes the container's cgroup, so
// its process shows state D rather than T; Dir and LogPath return "" (the
// data and output stay in Docker); Env entries are set inside the container,
// where an LD_PRELOAD path resolves only because it is bind-mounted there
// read-only. Its methods are safe for concurrent use.
type RedisContainer struct {
	c *container
}

// ContainerOption adjusts a container started by StartRedisContainer.
type ContainerOption func(*containerOptions)

type containerOptions struct {
	binds   []string
	hostNet bool
}

// WithBinds adds Docker bind mounts, "HOST:CONTAINER[:ro]" (the host is the
// engine's). Default: only the LD_PRELOAD files of cfg.Env.
func WithBinds(binds ...string) ContainerOption {
	return func(o *containerOptions) { o.binds = append(o.binds, binds...) }
}

// WithHostNetwork runs the container in the host's network namespace,
// listening on 127.0.0.1:Port directly, so that it can reach servers that
// listen on the host's loopback (a replica whose link runs through a proxy
// of this process, for example). NetworkAddr then fails. Default: Docker's
// default bridge, with the port published on 127.0.0.1.
func WithHostNetwork() ContainerOption {
	return func(o *containerOptions) { o.hostNet = true }
}

// StartRedisContainer starts a Redis container from the image chosen by
// QUORUMLOCK_REDIS_IMAGE (default: quorumlock/redis:7 if `make images` built
// it, else redis:7) with the same command line as StartRedisProcess, and
// returns once it answers PING. cfg.Dir is ignored. ctx bounds the start
// only (15s when it has no deadline). Errors wrap ErrDockerUnavailable when
// no engine answers or the image is missing.
func StartRedisContainer(ctx context.Context, cfg RedisConfig, opts ...ContainerOption) (*RedisContainer, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, errInvalidPort("redis", cfg.Port)
	}
	if cfg.TLS != nil {
		// The files would have to be mounted and the probe taught TLS:
		// refuse rather than start a plain node that a test takes for TLS.
		return nil, errors.New("servers: TLS nodes run only as processes (StartRedisProcess)")
	}
	var o containerOptions
	for _, opt := range opts {
		opt(&o)
	}
	persist, err := cfg.Persistence.args()
	if err != nil {
		return nil, err
	}
	if err := dockerReady(); err != nil {
		return nil, err
	}
	image, err := resolveImage(RedisImageEnv, redisImages)
	if err != nil {
		return nil, err
	}
	cmdFor := func(port int, bind string) []string {
		cmd := []string{
			"redis-server",
			"--port", strconv.Itoa(port),
			"--bind", bind,
			"--dir", "/data",
			"--daemonize", "no",
			"--logfile", "",
			"--maxmemory-policy", "noeviction",
			"--protected-mode", "no",
		}
		cmd = append(cmd, persist...)
		return append(cmd, cfg.ExtraArgs...)
	}
	spec := containerSpec{
		what:     "redis",
		image:    image,
		cmd:      cmdFor(6379, "0.0.0.0"),
		env:      cfg.Env,
		binds:    append(preloadBinds(cfg.Env), o.binds...),
		ctrPort:  "6379/tcp",
		hostPort: cfg.Port,
		hostNet:  o.hostNet,
		cmdFor:   func(port int) []string { return cmdFor(port, "127.0.0.1") },
	}
	for attempt := 1; ; attempt++ {
		c, err := runContainer(ctx, spec)
		if err != nil {
			return nil, err
		}
		r := &RedisContainer{c: c}
		err = r.waitReady(ctx)
		if err == nil {
			return r, nil
		}
		_ = c.stop()
		// On the host network the server itself binds the port, so a clash
		// shows only in its output.
		if !o.hostNet || cfg.Port != 0 || !portClash(err.Error()) || attempt == startAttempts {
			return nil, err
		}
	}
}

func (r *RedisContainer) ping(ctx context.Context) error { return pingRedis(ctx, r.Addr(), 0, nil) }

// waitReady waits for PING; ctx bounds it (15s when it has no deadline).
func (r *RedisContainer) waitReady(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, redisStartTimeout)
	defer cancel()
	return r.c.waitReady(ctx, r.ping)
}

// preloadBinds mounts every absolute host file named in an LD_PRELOAD entry
// read-only at the same path, so that a shim built on the host (for the
// clock jump) is found inside the container. The image is Debian bookworm,
// so a shim built on a bookworm host links against the same libc.
func preloadBinds(env []string) []string {
	var binds []string
	for _, kv := range env {
		v, ok := strings.CutPrefix(kv, "LD_PRELOAD=")
		if !ok {
			continue
		}
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ':' || r == ' ' }) {
			if !filepath.IsAbs(p) {
				continue
			}
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				binds = append(binds, p+":"+p+":ro")
			}
		}
	}
	return binds
}

// Addr returns "127.0.0.1:PORT"; it stays the same across restarts.
func (r *RedisContainer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.c.port))
}

// Port returns the host port; it stays the same across restarts.
func (r *RedisContainer) Port() int { return r.c.port }

// Dir returns "": the data directory is inside the container.
func (r *RedisContainer) Dir() string { return "" }

// LogPath returns "": the output is in the container's log (docker logs).
func (r *RedisContainer) LogPath() string { return "" }

// ContainerID returns the Docker container's id, for faults this type does
// not offer (network disconnect, for example).
func (r *RedisContainer) ContainerID() string { return r.c.id }

// NetworkAddr returns "IP:6379", the address other containers on Docker's
// default bridge reach the server at (for --replicaof), or an error when the
// container is not running. The IP may change across a restart.
func (r *RedisContainer) NetworkAddr() (string, error) {
	st, err := r.c.inspect()
	if err != nil {
		return "", err
	}
	if !st.State.Running || st.ip() == "" {
		return "", fmt.Errorf("servers: redis container %s has no address: not running", r.c.name)
	}
	return net.JoinHostPort(st.ip(), "6379"), nil
}

// PID returns the host pid of the container's main process, or 0 when it is
// not running or was stopped. After Restart it is a different pid.
func (r *RedisContainer) PID() int { return r.c.pid() }

// Pause freezes the container (docker pause): connections stay open and
// requests hang. It fails if the container is not running.
func (r *RedisContainer) Pause() error { return r.c.pause() }

// Resume undoes Pause (docker unpause).
func (r *RedisContainer) Resume() error { return r.c.resume() }

// Kill ends the container with SIGKILL, a crash, and waits until it stopped.
// Killing a node that already exited is not an error; Restart brings it back.
func (r *RedisContainer) Kill() error { return r.c.kill() }

// Restart kills the container if it runs and starts it again on the same
// port. Its filesystem survives, so with PersistenceNone the node comes back
// empty and with PersistenceAOFAlways with every acknowledged write, as a
// process does. It returns once PING answers.
func (r *RedisContainer) Restart(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, redisStartTimeout)
	defer cancel()
	return r.c.restart(ctx, r.ping)
}

// Stop removes the container for good. It is idempotent.
func (r *RedisContainer) Stop() error { return r.c.stop() }
