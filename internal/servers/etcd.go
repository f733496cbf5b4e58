package servers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
)

// EtcdConfig describes a static etcd cluster on loopback ports. The zero
// value is three members with a 50 ms heartbeat and a 500 ms election
// timeout in a fresh temporary directory.
type EtcdConfig struct {
	// Members is the cluster size; 0 means 3.
	Members int
	// Dir holds one data directory and one log per member; empty means a
	// temporary directory that Stop removes.
	Dir string
	// HeartbeatMs and ElectionMs are etcd's --heartbeat-interval and
	// --election-timeout; 0 means 50 and 500. etcd's defaults (100, 1000)
	// make every leader loss cost more than a second; shorter ones let
	// the faults finish sooner while keeping the ratio etcd advises.
	HeartbeatMs, ElectionMs int
	// PeerHost is the IP address the members' peer URLs listen on and
	// advertise; empty means 127.0.0.1. (Go's HTTP client never sends a
	// loopback URL through a proxy, so a suite that puts a proxy between
	// the members, through MemberEnv, needs another local address.)
	PeerHost string
	// MemberEnv, when not nil, returns what member i's environment gets
	// beyond this process's (HTTP_PROXY, say: the members' peer traffic
	// honours it).
	MemberEnv func(i int) []string
	// Image, when not empty, runs each member in a container of that
	// image on the host's network (StartHostContainer: the same command,
	// ports and directories), instead of as a child process.
	Image string
}

// EtcdCluster is a static etcd cluster whose members run as children of
// this process. Its methods are safe for concurrent use.
type EtcdCluster struct {
	dir     string
	ownsDir bool
	members []*EtcdMember
}

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

const etcdStartTimeout = 30 * time.Second

// StartEtcdCluster starts every member at once (a member cannot become
// ready before a majority of its peers runs) and returns when each answers
// /health, which requires an elected leader. ctx bounds the start only (30s
// when it has no deadline). On failure nothing is left running and the
// error carries the end of the failing member's log.
func StartEtcdCluster(ctx context.Context, cfg EtcdConfig) (*EtcdCluster, error) {
	n := cfg.Members
	if n == 0 {
		n = 3
	}
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("servers: etcd cluster of %d members: want 1 to 9", n)
	}
	hb, el := cfg.HeartbeatMs, cfg.ElectionMs
	if hb == 0 {
		hb = 50
	}
	if el == 0 {
		el = 500
	}
	if hb <= 0 || el < 5*hb {
		return nil, fmt.Errorf("servers: etcd heartbeat %d ms, election timeout %d ms: want an election timeout of at least five heartbeats", hb, el)
	}
	bin, err := lookBinary("etcd")
	if err != nil {
		return nil, err
	}
	c := &EtcdCluster{dir: cfg.Dir}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "quorumlock-etcd-"); err != nil {
			return nil, fmt.Errorf("servers: etcd dir: %w", err)
		}
		c.ownsDir = true
	} else if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: etcd dir: %w", err)
	}
	// Ports come from closed listeners, so another process may take one
	// before etcd binds it; a start that fails for that reason is rare
	// enough to report rather than retry member by member.
	peerHost := cfg.PeerHost
	if peerHost == "" {
		peerHost = "127.0.0.1"
	}
	if net.ParseIP(peerHost) == nil {
		return nil, fmt.Errorf("servers: etcd peer host %q: want an IP address", peerHost)
	}
	peers := make([]string, n)
	for i := range n {
		cp, err1 := freePort()
		pp, err2 := freePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, c.abort(err)
		}
		m := &EtcdMember{bin: bin, name: fmt.Sprintf("m%d", i), dir: filepath.Join(c.dir, fmt.Sprintf("m%d", i)), client: cp}
		if err := os.MkdirAll(m.dir, 0o700); err != nil {
			return nil, c.abort(fmt.Errorf("servers: etcd dir: %w", err))
		}
		if cfg.MemberEnv != nil {
			m.env = cfg.MemberEnv(i)
		}
		m.image = cfg.Image
		m.peer = net.JoinHostPort(peerHost, strconv.Itoa(pp))
		peerURL := "http://" + m.peer
		peers[i] = m.name + "=" + peerURL
		m.args = []string{
			"--name", m.name,
			"--data-dir", filepath.Join(m.dir, "data"),
			"--listen-client-urls", m.url(),
			"--advertise-client-urls", m.url(),
			"--listen-peer-urls", peerURL,
			"--initial-advertise-peer-urls", peerURL,
			"--initial-cluster-token", "quorumlock-" + filepath.Base(c.dir),
			"--initial-cluster-state", "new",
			"--heartbeat-interval", strconv.Itoa(hb),
			"--election-timeout", strconv.Itoa(el),
			// Clients may ping every 500 ms, to find a stopped member
			// quickly; etcd's default would answer such pings with GOAWAY.
			"--grpc-keepalive-min-time", "500ms",
			"--logger", "zap",
			"--log-outputs", "stderr",
		}
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		m.args = append(m.args, "--initial-cluster", strings.Join(peers, ","))
	}
	ctx, cancel := withDefaultTimeout(ctx, etcdStartTimeout)
	defer cancel()
	for _, m := range c.members {
		if m.image != "" {
			if m.ctr, err = StartHostContainer(ctx, m.containerSpec()); err != nil {
				return nil, c.abort(err)
			}
			continue
		}
		if m.c, err = m.launch(); err != nil {
			return nil, c.abort(err)
		}
	}
	var g errgroup.Group
	for _, m := range c.members {
		if m.ctr != nil {
			g.Go(func() error { return m.waitContainer(ctx) })
			continue
		}
		g.Go(func() error { return m.waitReady(ctx, m.c) })
	}
	if err := g.Wait(); err != nil {
		return nil, c.abort(err)
	}
	return c, nil
}

// abort stops what started and removes an owned directory, returning err.
func (c *EtcdCluster) abort(err error) error {
	return errors.Join(err, c.Stop())
}

// Members returns the members in the order of their names (m0, m1, ...).
func (c *EtcdCluster) Members() []*EtcdMember { return c.members }

// Endpoints returns every member's client address (host:port).
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.Addr()
	}
	return out
}

// Stop stops every member (SIGTERM, SIGKILL after 10s) and removes the
// directory if StartEtcdCluster created it. It is idempotent.
func (c *EtcdCluster) Stop() error {
	var live []*EtcdMember
	for _, m := range c.members {
		if m != nil {
			live = append(live, m)
		}
	}
	err := StopAll(live)
	if c.ownsDir {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
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
