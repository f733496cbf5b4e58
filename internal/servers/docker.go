package servers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ory/dockertest/v3"
	dc "github.com/ory/dockertest/v3/docker"
)

// ErrDockerUnavailable is wrapped by the errors of the container starters
// when no Docker engine answers or an image is neither present nor pullable.
var ErrDockerUnavailable = errors.New("servers: docker unavailable")

// Image variables shared with compose/redlock-5.yml. When unset, the image
// `make images` builds is used if present, else the official one.
const (
	RedisImageEnv    = "QUORUMLOCK_REDIS_IMAGE"
	PostgresImageEnv = "QUORUMLOCK_POSTGRES_IMAGE"
)

var (
	redisImages    = [2]string{"quorumlock/redis:7", "redis:7"}
	postgresImages = [2]string{"quorumlock/postgres:15", "postgres:15"}
)

// Labels on every container this package starts. The owner label lets a
// later run remove the containers of a test binary that died before its
// cleanups ran (containers, unlike child processes, get no parent-death
// signal).
const (
	labelManaged = "org.quorumlock.testenv"
	labelOwner   = "org.quorumlock.testenv.owner"
)

var docker struct {
	once sync.Once
	pool *dockertest.Pool
	err  error
}

// dockerPool connects to the engine named by DOCKER_HOST (or the default
// socket) once per process, and removes containers orphaned by earlier runs.
func dockerPool() (*dockertest.Pool, error) {
	docker.once.Do(func() {
		pool, err := dockertest.NewPool("")
		if err == nil {
			// Keep-alives are off in the client's default transport, so no
			// idle-connection goroutine outlives a call (goleak checks).
			pool.Client.SetTimeout(2 * time.Minute)
			err = pool.Client.Ping()
		}
		if err != nil {
			docker.err = fmt.Errorf("%w: no engine answers: %v", ErrDockerUnavailable, err)
			return
		}
		docker.pool = pool
		reapOrphans(pool)
	})
	return docker.pool, docker.err
}

// resolveImage picks the image for a server kind: the variable if set, else
// the locally built image if present, else the official one. An image that
// is not present is pulled; a failed pull names `make images`.
func resolveImage(pool *dockertest.Pool, envVar string, candidates [2]string) (repo, tag string, err error) {
	image := os.Getenv(envVar)
	if image == "" {
		image = candidates[1]
		if _, err := pool.Client.InspectImage(candidates[0]); err == nil {
			image = candidates[0]
		}
	}
	repo, tag = splitImage(image)
	if _, err := pool.Client.InspectImage(repo + ":" + tag); err == nil {
		return repo, tag, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := pool.Client.PullImage(dc.PullImageOptions{Repository: repo, Tag: tag, Context: ctx}, dc.AuthConfiguration{}); err != nil {
		return "", "", fmt.Errorf("%w: image %s:%s is not present and could not be pulled (without registry access, run `make images`; %s selects another image): %v",
			ErrDockerUnavailable, repo, tag, envVar, err)
	}
	return repo, tag, nil
}

// splitImage splits "name:tag"; a colon before the last slash belongs to a
// registry port, not to a tag.
func splitImage(image string) (repo, tag string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, "latest"
	}
	return image[:i], image[i+1:]
}

// containerSpec is one server container: the image, its command, and the
// container port published on a fixed 127.0.0.1 port of the host.
type containerSpec struct {
	what     string // for messages: "redis", "postgres"
	repo     string
	tag      string
	cmd      []string
	env      []string
	binds    []string
	ctrPort  string // "6379/tcp"
	hostPort int    // 0 picks a free one (retried on a clash)
	// hostNet runs the container in the host's network namespace: nothing
	// is published, and cmdFor must make the server listen on the port.
	hostNet bool
	cmdFor  func(port int) []string
}

// container is one server container and the fixed host port it listens on.
type container struct {
	pool *dockertest.Pool
	what string
	id   string
	name string
	port int

	mu      sync.Mutex
	stopped bool
}

// runContainer creates and starts spec. The host port is fixed at creation,
// not left to Docker, so that it survives a stop and start (an ephemeral
// binding would change on every start).
func runContainer(pool *dockertest.Pool, spec containerSpec) (*container, error) {
	auto := spec.hostPort == 0
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port := spec.hostPort
		if auto {
			var err error
			if port, err = freePort(); err != nil {
				return nil, err
			}
		}
		name := "quorumlock-test-" + spec.what + "-" + randomHex(6)
		opts := &dockertest.RunOptions{
			Name:       name,
			Repository: spec.repo,
			Tag:        spec.tag,
			Cmd:        spec.cmd,
			Env:        spec.env,
			Labels:     map[string]string{labelManaged: "1", labelOwner: ownerLabel()},
		}
		if spec.hostNet {
			opts.Cmd = spec.cmdFor(port)
		} else {
			opts.ExposedPorts = []string{spec.ctrPort}
			opts.PortBindings = map[dc.Port][]dc.PortBinding{
				dc.Port(spec.ctrPort): {{HostIP: "127.0.0.1", HostPort: strconv.Itoa(port)}},
			}
		}
		res, err := pool.RunWithOptions(opts, func(hc *dc.HostConfig) {
			hc.Binds = append(hc.Binds, spec.binds...)
			hc.AutoRemove = false
			hc.RestartPolicy = dc.RestartPolicy{Name: "no"}
			if spec.hostNet {
				hc.NetworkMode = "host"
				hc.PublishAllPorts = false
			}
		})
		if err == nil {
			return &container{pool: pool, what: spec.what, id: res.Container.ID, name: name, port: port}, nil
		}
		// A container that was created but failed to start still exists.
		_ = pool.RemoveContainerByName(name)
		lastErr = fmt.Errorf("servers: start %s container from %s:%s: %w", spec.what, spec.repo, spec.tag, err)
		if !auto || !dockerPortClash(err) {
			break
		}
	}
	return nil, lastErr
}

func dockerPortClash(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

func (c *container) inspect() (*dc.Container, error) {
	ctr, err := c.pool.Client.InspectContainer(c.id)
	if err != nil {
		return nil, fmt.Errorf("servers: inspect %s container %s: %w", c.what, c.name, err)
	}
	return ctr, nil
}

func (c *container) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return 0
	}
	ctr, err := c.inspect()
	if err != nil || !ctr.State.Running {
		return 0
	}
	return ctr.State.Pid
}

func (c *container) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("servers: %s container was stopped", c.what)
	}
	if err := c.pool.Client.PauseContainer(c.id); err != nil {
		return fmt.Errorf("servers: pause %s container %s: %w", c.what, c.name, err)
	}
	return nil
}

func (c *container) resume() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("servers: %s container was stopped", c.what)
	}
	if err := c.pool.Client.UnpauseContainer(c.id); err != nil {
		return fmt.Errorf("servers: unpause %s container %s: %w", c.what, c.name, err)
	}
	return nil
}

func (c *container) kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("servers: %s container was stopped", c.what)
	}
	return c.killLocked()
}

// killLocked sends SIGKILL and waits until the container is no longer
// running. A paused container is thawed first: the engine refuses to kill
// it, while a stopped process does die of SIGKILL.
func (c *container) killLocked() error {
	ctr, err := c.inspect()
	if err != nil {
		return err
	}
	if !ctr.State.Running {
		return nil
	}
	if ctr.State.Paused {
		_ = c.pool.Client.UnpauseContainer(c.id)
	}
	err = c.pool.Client.KillContainer(dc.KillContainerOptions{ID: c.id, Signal: dc.SIGKILL})
	var notRunning *dc.ContainerNotRunning
	if err != nil && !errors.As(err, &notRunning) {
		return fmt.Errorf("servers: kill %s container %s: %w", c.what, c.name, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctr, err := c.inspect()
		if err != nil {
			return err
		}
		if !ctr.State.Running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: %s container %s still runs 30s after SIGKILL", c.what, c.name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// restart kills the container if it runs and starts it again; its
// filesystem, and so any persisted data, is kept. ready is polled until it
// succeeds or ctx ends.
func (c *container) restart(ctx context.Context, ready func(context.Context) error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("servers: %s container was stopped", c.what)
	}
	if err := c.killLocked(); err != nil {
		return err
	}
	if err := c.pool.Client.StartContainer(c.id, nil); err != nil {
		return fmt.Errorf("servers: start %s container %s again: %w", c.what, c.name, err)
	}
	return c.waitReady(ctx, ready)
}

// waitReady polls ready until it succeeds; a container that exits meanwhile
// fails at once, with the end of its output.
func (c *container) waitReady(ctx context.Context, ready func(context.Context) error) error {
	var last error
	for i := 0; ; i++ {
		if last = ready(ctx); last == nil {
			return nil
		}
		if i%10 == 0 {
			ctr, err := c.inspect()
			if err != nil {
				return err
			}
			if !ctr.State.Running {
				return c.startupError(fmt.Errorf("container exited with status %d", ctr.State.ExitCode))
			}
		}
		select {
		case <-ctx.Done():
			return c.startupError(fmt.Errorf("%w (last check: %v)", ctx.Err(), last))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (c *container) startupError(cause error) error {
	return fmt.Errorf("servers: %s container %s on 127.0.0.1:%d did not come up: %w\n--- container output ---\n%s",
		c.what, c.name, c.port, cause, c.logTail())
}

// logTail returns the last lines the container wrote, for error messages.
func (c *container) logTail() string {
	var out bytes.Buffer
	err := c.pool.Client.Logs(dc.LogsOptions{
		Container:    c.id,
		OutputStream: &out,
		ErrorStream:  &out,
		Stdout:       true,
		Stderr:       true,
		Tail:         "40",
	})
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v)", err)
	}
	if s := strings.TrimSpace(out.String()); s != "" {
		return s
	}
	return "(no output)"
}

// stop removes the container and its anonymous volumes. It kills rather
// than stops: test data is disposable, and dockertest sets every container's
// stop signal to SIGWINCH, which the servers ignore, so a graceful stop would
// always wait out its grace period. It is idempotent.
func (c *container) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	err := c.pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: c.id, Force: true, RemoveVolumes: true})
	var noSuch *dc.NoSuchContainer
	if err != nil && !errors.As(err, &noSuch) {
		return fmt.Errorf("servers: remove %s container %s: %w", c.what, c.name, err)
	}
	return nil
}

// ownerLabel identifies this process: host name, pid and the process's start
// time, so that a reused pid is not mistaken for the owner.
func ownerLabel() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + processStart(os.Getpid())
}

// processStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), or "" where that is not available.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces; fields after it do not.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// reapOrphans removes containers this package started from a process on this
// host that no longer exists. Containers of live processes, of other hosts,
// or without a start time to compare are left alone.
func reapOrphans(pool *dockertest.Pool) {
	list, err := pool.Client.ListContainers(dc.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {labelManaged}},
	})
	if err != nil {
		return
	}
	host, _ := os.Hostname()
	for _, ctr := range list {
		parts := strings.Split(ctr.Labels[labelOwner], "/")
		if len(parts) != 3 || parts[0] != host || parts[2] == "" {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || processStart(pid) == parts[2] {
			continue
		}
		_ = pool.Client.RemoveContainer(dc.RemoveContainerOptions{ID: ctr.ID, Force: true, RemoveVolumes: true})
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
