package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// Backend starts the servers a run needs and performs the faults that act
// on a server itself. The local backend runs every process as a child of
// this one; a compose backend would map the same calls onto containers
// (docker kill, docker pause, a restart of the service).
type Backend interface {
	// Name is how --backend selects it.
	Name() string
	// StartRedis starts one Redis node. It is stopped by Close at the
	// latest.
	StartRedis(ctx context.Context, spec RedisSpec) (RedisNode, error)
	// Postgres returns the PostgreSQL server of the suite, starting it on
	// first use. It is stopped by Close.
	Postgres(ctx context.Context) (Postgres, error)
	// StartEtcd starts a static etcd cluster of n members and returns
	// them in order, with a function that stops them all and removes
	// what they wrote. Close stops it at the latest.
	StartEtcd(ctx context.Context, n int) ([]Node, func() error, error)
	// StartZooKeeper starts a ZooKeeper ensemble of n servers, as
	// StartEtcd does an etcd cluster.
	StartZooKeeper(ctx context.Context, n int) ([]Node, func() error, error)
	// Close stops everything the backend started and waits until it is
	// gone. It is idempotent.
	Close() error
}

// RedisSpec describes one node of a topology.
type RedisSpec struct {
	// AOF selects appendonly yes with appendfsync always; otherwise the
	// node keeps nothing across a restart.
	AOF bool
	// ReplicaOf makes the node an asynchronous replica of that address.
	ReplicaOf string
	// Clock makes the node's wall clock adjustable (RedisNode.JumpClock).
	Clock bool
}

// Node is one server of a topology's lock service (a Redis node, an etcd
// member) and the faults every such server supports.
type Node interface {
	// Addr is the node's address; it stays the same across restarts.
	Addr() string
	// Kill ends the node with SIGKILL.
	Kill() error
	// Restart starts a killed (or running) node again on the same address;
	// a Redis node without AOF comes back empty, an etcd member with its
	// data.
	Restart(ctx context.Context) error
	// Pause freezes the node (SIGSTOP); Resume undoes it.
	Pause() error
	Resume() error
	// Stop shuts the node down for good.
	Stop() error
}

// RedisNode is one running Redis server and the faults it supports.
type RedisNode interface {
	Node
	// JumpClock sets the node's wall clock to run offset ahead of the
	// real time (negative: behind). It fails for nodes started without
	// RedisSpec.Clock.
	JumpClock(offset time.Duration) error
}

// Postgres is the database server the workers' counter lives on.
type Postgres interface {
	CreateDatabase(ctx context.Context, name string) error
	DropDatabase(ctx context.Context, name string) error
	DSN(db string) string
}

// LocalBackend runs redis-server and PostgreSQL as children of this
// process on loopback ports (internal/servers). Every child is in its own
// process group with a parent-death signal, so even a SIGKILL of this
// process leaves nothing running; Close stops them in the ordinary way.
type LocalBackend struct {
	// TempDir is where the clock shim is built; empty means os.TempDir.
	TempDir string
	// PostgresPort, when not 0, is the port PostgreSQL must listen on (a
	// taken port is then an error, not a retry).
	PostgresPort int
	// RedisBasePort, when not 0, makes node k of a run listen on
	// RedisBasePort+k instead of a free port.
	RedisBasePort int

	servers
	next int // the next node's offset from RedisBasePort
}

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

// NewLocalBackend returns a local backend after checking that the server
// binaries exist, so a missing one is reported before anything starts.
func NewLocalBackend() (*LocalBackend, error) {
	if err := checkLocalBinaries(); err != nil {
		return nil, err
	}
	return &LocalBackend{}, nil
}

// Name implements Backend.
func (b *LocalBackend) Name() string { return "local" }

// StartRedis implements Backend.
func (b *LocalBackend) StartRedis(ctx context.Context, spec RedisSpec) (RedisNode, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, errors.New("chaos: backend closed")
	}
	port := 0
	if b.RedisBasePort != 0 {
		port = b.RedisBasePort + b.next
		b.next++
	}
	b.mu.Unlock()
	if port != 0 {
		if err := portFree(port); err != nil {
			return nil, err
		}
	}
	cfg := srv.RedisConfig{Port: port}
	if spec.AOF {
		cfg.Persistence = srv.PersistenceAOFAlways
	}
	if spec.ReplicaOf != "" {
		host, p, err := net.SplitHostPort(spec.ReplicaOf)
		if err != nil {
			return nil, fmt.Errorf("chaos: replica of %q: %w", spec.ReplicaOf, err)
		}
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--replicaof", host, p)
	}
	n := &node{}
	if spec.Clock {
		env, err := b.movableClock(ctx, b.TempDir, true, n)
		if err != nil {
			return nil, err
		}
		cfg.Env = env
	}
	p, err := srv.StartRedisProcess(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: start redis-server: %w", err)
	}
	n.server = p
	b.add(n)
	return n, nil
}

// Postgres implements Backend.
func (b *LocalBackend) Postgres(ctx context.Context) (Postgres, error) {
	return b.postgres(func() (pgServer, error) {
		if b.PostgresPort != 0 {
			if err := portFree(b.PostgresPort); err != nil {
				return nil, err
			}
		}
		pg, err := srv.StartPostgresProcess(ctx, srv.PostgresConfig{Port: b.PostgresPort})
		if err != nil {
			return nil, fmt.Errorf("chaos: start PostgreSQL: %w", err)
		}
		return pg, nil
	})
}

// StartEtcd implements Backend: etcd processes on free loopback ports
// for clients (startEtcd).
func (b *LocalBackend) StartEtcd(ctx context.Context, n int) ([]Node, func() error, error) {
	return b.startEtcd(ctx, n, "")
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

// StartZooKeeper implements Backend: java processes on free loopback
// ports, every link between two servers through a proxy (zookeeper.go).
func (b *LocalBackend) StartZooKeeper(ctx context.Context, n int) ([]Node, func() error, error) {
	return b.startZooKeeper(ctx, n, "")
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

// StopRedis stops the nodes started so far (a run's topology); the
// PostgreSQL server stays up for the next run.
func (b *LocalBackend) StopRedis() error {
	err := b.stopRedis()
	b.mu.Lock()
	b.next = 0
	b.mu.Unlock()
	return err
}

// Close implements Backend.
func (b *LocalBackend) Close() error { return b.close(b.StopRedis) }

// portFree fails with a clear message when a fixed port is taken.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("chaos: port %d on 127.0.0.1 is in use: %w", port, err)
	}
	return l.Close()
}

// server is what redis-server processes and containers of
// internal/servers both offer.
type server interface {
	Addr() string
	Kill() error
	Restart(ctx context.Context) error
	Pause() error
	Resume() error
	Stop() error
}

// node is a RedisNode on one of those servers, with a clock that can be
// moved when it was started with one.
type node struct {
	server
	clockFile string
	clock     *clockShim
}

func (n *node) JumpClock(offset time.Duration) error {
	if n.clockFile == "" {
		return fmt.Errorf("chaos: node %s was started without an adjustable clock", n.Addr())
	}
	return n.clock.write(n.clockFile, offset)
}

// ClockTool names what moves the node's clock.
func (n *node) ClockTool() string {
	if n.clock == nil {
		return ""
	}
	return n.clock.Tool()
}
