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
