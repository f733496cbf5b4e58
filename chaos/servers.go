package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// servers is the bookkeeping both backends share: the nodes of the current
// run, the PostgreSQL server kept across runs, and the clock.
type servers struct {
	mu     sync.Mutex
	nodes  []*node
	etcd   []func() error // stops an etcd cluster or a ZooKeeper ensemble
	pg     pgServer
	clock  lazyShim
	closed bool
}

type pgServer interface {
	Postgres
	Stop() error
}

func (s *servers) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("chaos: backend closed")
	}
	return nil
}

// movableClock gives n a clock the suite can move and returns the
// environment redis-server needs for it.
func (s *servers) movableClock(ctx context.Context, tmp string, tryFaketime bool, n *node) ([]string, error) {
	shim, err := s.clock.get(ctx, tmp, tryFaketime)
	if err != nil {
		return nil, err
	}
	if n.clockFile, err = shim.newOffsetFile(); err != nil {
		return nil, err
	}
	n.clock = shim
	return shim.env(n.clockFile), nil
}

func (s *servers) add(n *node) {
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
}

// postgres returns the PostgreSQL server, started by start the first time.
func (s *servers) postgres(start func() (pgServer, error)) (Postgres, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("chaos: backend closed")
	}
	if s.pg != nil {
		return s.pg, nil
	}
	pg, err := start()
	if err != nil {
		return nil, err
	}
	s.pg = pg
	return pg, nil
}

// stopRedis stops the nodes started so far (a run's topology); the
// PostgreSQL server stays up for the next run.
func (s *servers) stopRedis() error {
	s.mu.Lock()
	nodes, etcd := s.nodes, s.etcd
	s.nodes, s.etcd = nil, nil
	s.mu.Unlock()
	err := srv.StopAll(nodes)
	for _, stop := range etcd {
		err = errors.Join(err, stop())
	}
	return err
}

// close stops everything; stop is the backend's StopRedis.
func (s *servers) close(stop func() error) error {
	err := stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return err
	}
	s.closed = true
	if s.pg != nil {
		err = errors.Join(err, s.pg.Stop())
		s.pg = nil
	}
	return errors.Join(err, s.clock.remove())
}

// startEtcd starts an etcd cluster of n members, as child processes or,
// with an image, in containers on the host's network. Where the machine
// has an address other than loopback, the members' peer traffic runs on
// it, each member's through a gate of its own (peergate.go), so that a
// member can be cut off from its peers.
func (s *servers) startEtcd(ctx context.Context, n int, image string) ([]Node, func() error, error) {
	if err := s.checkOpen(); err != nil {
		return nil, nil, err
	}
	var gates []*peerGate
	closeGates := func() error {
		var err error
		for _, g := range gates {
			err = errors.Join(err, g.close())
		}
		return err
	}
	cfg := srv.EtcdConfig{Members: n, Image: image}
	if host := localPeerHost(); host != "" {
		for range n {
			g, err := newPeerGate()
			if err != nil {
				_ = closeGates()
				return nil, nil, err
			}
			gates = append(gates, g)
		}
		cfg.PeerHost = host
		cfg.MemberEnv = func(i int) []string {
			p := "http://" + gates[i].Addr()
			return []string{"HTTP_PROXY=" + p, "http_proxy=" + p, "NO_PROXY=", "no_proxy="}
		}
	}
	c, err := srv.StartEtcdCluster(ctx, cfg)
	if err != nil {
		_ = closeGates()
		if errors.Is(err, srv.ErrBinaryNotFound) {
			return nil, nil, fmt.Errorf("chaos: start etcd (Debian: apt-get install etcd-server): %w", err)
		}
		return nil, nil, fmt.Errorf("chaos: start etcd: %w", err)
	}
	stop := func() error { return errors.Join(c.Stop(), closeGates()) }
	s.mu.Lock()
	s.etcd = append(s.etcd, stop)
	s.mu.Unlock()
	nodes := make([]Node, 0, n)
	for i, m := range c.Members() {
		nodes = append(nodes, &etcdNode{EtcdMember: m, i: i, gates: gates})
	}
	return nodes, stop, nil
}

// etcdNode is an etcd member whose peer traffic runs through gates, one
// per member (none where the machine has no address but loopback).
type etcdNode struct {
	*srv.EtcdMember
	i     int
	gates []*peerGate
}

// Isolate cuts the member off from its peers (on) or heals it: its own
// gate refuses everything, and the others' refuse its peer address. Its
// clients still reach it.
func (n *etcdNode) Isolate(on bool) error {
	if n.gates == nil {
		return errors.New("chaos: this machine has no address but loopback, so etcd members cannot be cut off from each other " +
			"(Go's HTTP client sends no loopback request through a proxy)")
	}
	target := n.PeerAddr()
	for j, g := range n.gates {
		if j == n.i {
			g.refuseAll(on)
		} else {
			g.refuse(target, on)
		}
	}
	return nil
}

// startZooKeeper starts an ensemble of n servers, as child processes or,
// with an image, in containers on the host's network.
func (s *servers) startZooKeeper(ctx context.Context, n int, image string) ([]Node, func() error, error) {
	if err := s.checkOpen(); err != nil {
		return nil, nil, err
	}
	z, err := startZooKeeper(ctx, n, image)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.etcd = append(s.etcd, z.stop)
	s.mu.Unlock()
	nodes := make([]Node, 0, n)
	for _, zs := range z.servers {
		nodes = append(nodes, zs)
	}
	return nodes, z.stop, nil
}
