package servers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// EtcdMember is one member of an EtcdCluster. It keeps its ports and data
// directory across Kill and Restart, so a restarted member rejoins with
// what it had written.
type EtcdMember struct {
	bin     string
	name    string
	dir     string // its data directory and log
	client  int    // client port
	args    []string
	env     []string
	peer    string // peer address, host:port
	image   string // run in a container of this image ("": a child process)
	ctr     *HostContainer
	mu      sync.Mutex
	c       *child
	stopped bool
}

func (m *EtcdMember) url() string { return fmt.Sprintf("http://127.0.0.1:%d", m.client) }

// Name is the member's etcd name.
func (m *EtcdMember) Name() string { return m.name }

// PeerAddr is the member's peer address (host:port), which the other
// members dial.
func (m *EtcdMember) PeerAddr() string { return m.peer }

// Addr is the member's client address; it stays the same across restarts.
func (m *EtcdMember) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.client)) }

// LogPath is the member's log; restarts append to it.
func (m *EtcdMember) LogPath() string { return filepath.Join(m.dir, "etcd.log") }

// PID is the member's pid, or 0 when it is not running.
func (m *EtcdMember) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.c == nil || m.c.exited() {
		return 0
	}
	return m.c.pid()
}

// containerSpec is the member's container: etcd with the member's flags,
// its directory at the same path.
func (m *EtcdMember) containerSpec() HostContainerSpec {
	return HostContainerSpec{What: "etcd", Image: m.image, Cmd: append([]string{"etcd"}, m.args...), Env: m.env,
		Binds: []string{m.dir + ":" + m.dir}}
}

// waitContainer polls /health as waitReady does, for a member in a
// container.
func (m *EtcdMember) waitContainer(ctx context.Context) error {
	for {
		err := m.health(ctx)
		if err == nil {
			return nil
		}
		if !m.ctr.Running() {
			return fmt.Errorf("servers: etcd member %s container exited: %s", m.name, m.ctr.Logs())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("servers: etcd member %s container on %s did not come up: %w (last /health: %v)\n%s",
				m.name, m.Addr(), ctx.Err(), err, m.ctr.Logs())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (m *EtcdMember) launch() (*child, error) {
	return startChild(childSpec{path: m.bin, args: m.args, env: m.env, dir: m.dir, logPath: m.LogPath()})
}

// waitReady polls the member's /health until it reports a healthy member
// of a cluster with a leader.
func (m *EtcdMember) waitReady(ctx context.Context, c *child) error {
	var last error
	for {
		if last = m.health(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return c.startupError("etcd member "+m.name+" on "+m.Addr(), fmt.Errorf("%w (last /health: %v)", ctx.Err(), last))
		case <-c.done:
			return c.startupError("etcd member "+m.name+" on "+m.Addr(), errors.New("process exited"))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// healthClient keeps no idle connection: a poller must not leave
// goroutines behind once the member is ready.
var healthClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func (m *EtcdMember) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url()+"/health", nil)
	if err != nil {
		return err
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return fmt.Errorf("/health: %w", err)
	}
	if h.Health != "true" {
		return fmt.Errorf("/health says %q", h.Health)
	}
	return nil
}

// Pause freezes the member (SIGSTOP); Resume undoes it.
func (m *EtcdMember) Pause() error { return m.signal(syscall.SIGSTOP) }

// Resume continues a paused member (SIGCONT).
func (m *EtcdMember) Resume() error { return m.signal(syscall.SIGCONT) }

func (m *EtcdMember) signal(sig syscall.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctr != nil {
		if sig == syscall.SIGSTOP {
			return m.ctr.Pause()
		}
		return m.ctr.Resume()
	}
	if m.c == nil {
		return errors.New("servers: etcd member was stopped")
	}
	if sig == syscall.SIGSTOP {
		return m.c.pause()
	}
	return m.c.signalGroup(sig)
}

// Kill ends the member with SIGKILL and waits until it is gone. Killing a
// member that already exited is not an error; Restart brings it back.
func (m *EtcdMember) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctr != nil {
		return m.ctr.Kill()
	}
	if m.c == nil {
		return errors.New("servers: etcd member was stopped")
	}
	return m.c.kill()
}

// Restart starts the member again on the same ports and data directory,
// killing it first if it still runs, and returns once it answers /health
// (which needs a leader: a majority of the cluster must be running).
func (m *EtcdMember) Restart(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctr != nil {
		if m.stopped {
			return errors.New("servers: etcd member was stopped")
		}
		ctx, cancel := withDefaultTimeout(ctx, etcdStartTimeout)
		defer cancel()
		return m.ctr.Restart(ctx, m.health)
	}
	if m.stopped || m.c == nil {
		return errors.New("servers: etcd member was stopped")
	}
	if err := m.c.kill(); err != nil {
		return err
	}
	c, err := m.launch()
	if err != nil {
		return err
	}
	m.c = c
	ctx, cancel := withDefaultTimeout(ctx, etcdStartTimeout)
	defer cancel()
	return m.waitReady(ctx, c)
}

// Stop ends the member for good: SIGTERM, then SIGKILL after 10s. It is
// idempotent and succeeds if the member already died.
func (m *EtcdMember) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctr != nil {
		m.stopped = true
		return m.ctr.Stop()
	}
	if m.stopped || m.c == nil {
		m.stopped = true
		return nil
	}
	m.stopped = true
	return m.c.stop(syscall.SIGTERM, 10*time.Second)
}
