package servers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// containerSpec is one server container: the image, its command, and the
// container port published on a fixed 127.0.0.1 port of the host.
type containerSpec struct {
	what     string // for messages: "redis", "postgres"
	image    string
	cmd      []string
	env      []string
	binds    []string
	ctrPort  string // "6379/tcp"
	hostPort int    // 0 picks a free one (retried on a clash)
	// hostNet runs the container in the host's network namespace: nothing
	// is published, and cmdFor must make the server listen on the port.
	hostNet bool
	cmdFor  func(port int) []string
	// user, when not empty, is the uid:gid the server runs as (so that
	// what it writes to a bind mount belongs to this process's user).
	user string
}

// container is one server container and the fixed host port it listens on.
type container struct {
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
func runContainer(ctx context.Context, spec containerSpec) (*container, error) {
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
		args := []string{"run", "--detach", "--name", name,
			"--label", labelManaged + "=1",
			"--label", labelOwner + "=" + ownerLabel(),
			"--restart", "no",
		}
		cmd := spec.cmd
		if spec.hostNet {
			args = append(args, "--network", "host")
			cmd = spec.cmdFor(port)
		} else {
			args = append(args, "--publish", "127.0.0.1:"+strconv.Itoa(port)+":"+spec.ctrPort)
		}
		if spec.user != "" {
			args = append(args, "--user", spec.user)
		}
		for _, e := range spec.env {
			args = append(args, "--env", e)
		}
		for _, b := range spec.binds {
			args = append(args, "--volume", b)
		}
		args = append(args, spec.image)
		args = append(args, cmd...)
		out, err := dockerCmd(ctx, args...)
		if err == nil {
			fields := strings.Fields(out)
			if len(fields) > 0 {
				return &container{what: spec.what, id: fields[len(fields)-1], name: name, port: port}, nil
			}
			err = errors.New("docker run printed no container id")
		}
		// A container that was created but failed to start still exists.
		_, _ = dockerCmd(context.WithoutCancel(ctx), "rm", "--force", "--volumes", name)
		lastErr = fmt.Errorf("servers: start %s container from %s: %w", spec.what, spec.image, err)
		if !auto || !dockerPortClash(err) {
			break
		}
	}
	return nil, lastErr
}

func dockerPortClash(err error) bool {
	return dockerSays(err, "port is already allocated") || dockerSays(err, "address already in use")
}

// containerState is the part of `docker container inspect` this package
// reads.
type containerState struct {
	State struct {
		Running  bool
		Paused   bool
		Pid      int
		ExitCode int
	}
	NetworkSettings struct {
		IPAddress string
		Networks  map[string]struct{ IPAddress string }
	}
}

// ip returns the container's address on Docker's default bridge, or "".
// Engines that dropped the top-level field still fill the per-network one.
func (s *containerState) ip() string {
	if ip := s.NetworkSettings.IPAddress; ip != "" {
		return ip
	}
	return s.NetworkSettings.Networks["bridge"].IPAddress
}

func (c *container) inspect() (*containerState, error) {
	out, err := dockerCmd(context.Background(), "container", "inspect", c.id)
	if err != nil {
		return nil, fmt.Errorf("servers: inspect %s container %s: %w", c.what, c.name, err)
	}
	var list []containerState
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		return nil, fmt.Errorf("servers: inspect %s container %s: unexpected output (%v): %.200s", c.what, c.name, err, out)
	}
	return &list[0], nil
}

func (c *container) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return 0
	}
	st, err := c.inspect()
	if err != nil || !st.State.Running {
		return 0
	}
	return st.State.Pid
}

func (c *container) pause() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return fmt.Errorf("servers: %s container was stopped", c.what)
	}
	if _, err := dockerCmd(context.Background(), "pause", c.id); err != nil {
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
	if _, err := dockerCmd(context.Background(), "unpause", c.id); err != nil {
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
	st, err := c.inspect()
	if err != nil {
		return err
	}
	if !st.State.Running {
		return nil
	}
	ctx := context.Background()
	if st.State.Paused {
		_, _ = dockerCmd(ctx, "unpause", c.id)
	}
	if _, err := dockerCmd(ctx, "kill", "--signal", "KILL", c.id); err != nil && !dockerSays(err, "is not running") {
		return fmt.Errorf("servers: kill %s container %s: %w", c.what, c.name, err)
	}
	// docker wait returns once the container has stopped (at once if it
	// already has).
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := dockerCmd(wait, "wait", c.id); err != nil {
		if wait.Err() != nil {
			return fmt.Errorf("servers: %s container %s still runs 30s after SIGKILL", c.what, c.name)
		}
		return fmt.Errorf("servers: wait for %s container %s: %w", c.what, c.name, err)
	}
	return nil
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
	if _, err := dockerCmd(ctx, "start", c.id); err != nil {
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
			st, err := c.inspect()
			if err != nil {
				return err
			}
			if !st.State.Running {
				return c.startupError(fmt.Errorf("container exited with status %d", st.State.ExitCode))
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

// logTail returns the last lines the container wrote, stdout and stderr
// interleaved, for error messages.
func (c *container) logTail() string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "logs", "--tail", "40", c.id)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(output unavailable: %v: %s)", err, bytes.TrimSpace(out))
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return s
	}
	return "(no output)"
}

// stop removes the container and its anonymous volumes. It kills rather
// than stops: test data is disposable and a graceful stop only waits. It is
// idempotent.
func (c *container) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	c.stopped = true
	_, err := dockerCmd(context.Background(), "rm", "--force", "--volumes", c.id)
	if err != nil && !dockerSays(err, "No such container") {
		return fmt.Errorf("servers: remove %s container %s: %w", c.what, c.name, err)
	}
	return nil
}
