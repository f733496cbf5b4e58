package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/quorumlock/internal/testenv"
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

// RedisNode is one running Redis server and the faults it supports.
type RedisNode interface {
	// Addr is the node's address; it stays the same across restarts.
	Addr() string
	// Kill ends the node with SIGKILL.
	Kill() error
	// Restart starts a killed (or running) node again on the same address;
	// without AOF it comes back empty.
	Restart(ctx context.Context) error
	// Pause freezes the node (SIGSTOP); Resume undoes it.
	Pause() error
	Resume() error
	// JumpClock sets the node's wall clock to run offset ahead of the
	// real time (negative: behind). It fails for nodes started without
	// RedisSpec.Clock.
	JumpClock(offset time.Duration) error
	// Stop shuts the node down for good.
	Stop() error
}

// Postgres is the database server the workers' counter lives on.
type Postgres interface {
	CreateDatabase(ctx context.Context, name string) error
	DropDatabase(ctx context.Context, name string) error
	DSN(db string) string
}

// LocalBackend runs redis-server and PostgreSQL as children of this
// process on loopback ports (package testenv). Every child is in its own
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

	mu     sync.Mutex
	nodes  []*localNode
	pg     *testenv.PostgresProcess
	clock  lazyShim
	closed bool
	next   int
}

// NewLocalBackend returns a local backend after checking that the server
// binaries exist, so a missing one is reported before anything starts.
func NewLocalBackend() (*LocalBackend, error) {
	if err := CheckLocalBinaries(); err != nil {
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
	cfg := testenv.RedisConfig{Port: port}
	if spec.AOF {
		cfg.Persistence = testenv.PersistenceAOFAlways
	}
	if spec.ReplicaOf != "" {
		host, p, err := net.SplitHostPort(spec.ReplicaOf)
		if err != nil {
			return nil, fmt.Errorf("chaos: replica of %q: %w", spec.ReplicaOf, err)
		}
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--replicaof", host, p)
	}
	n := &localNode{}
	if spec.Clock {
		shim, err := b.clock.get(ctx, b.TempDir, true)
		if err != nil {
			return nil, err
		}
		n.clockFile, err = shim.newOffsetFile()
		if err != nil {
			return nil, err
		}
		n.clock = shim
		cfg.Env = shim.env(n.clockFile)
	}
	p, err := testenv.StartRedisProcess(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("chaos: start redis-server: %w", err)
	}
	n.p = p
	b.mu.Lock()
	b.nodes = append(b.nodes, n)
	b.mu.Unlock()
	return n, nil
}

// Postgres implements Backend.
func (b *LocalBackend) Postgres(ctx context.Context) (Postgres, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("chaos: backend closed")
	}
	if b.pg != nil {
		return b.pg, nil
	}
	if b.PostgresPort != 0 {
		if err := portFree(b.PostgresPort); err != nil {
			return nil, err
		}
	}
	pg, err := testenv.StartPostgresProcess(ctx, testenv.PostgresConfig{Port: b.PostgresPort})
	if err != nil {
		return nil, fmt.Errorf("chaos: start PostgreSQL: %w", err)
	}
	b.pg = pg
	return pg, nil
}

// StopRedis stops the nodes started so far (a run's topology); the
// PostgreSQL server stays up for the next run.
func (b *LocalBackend) StopRedis() error {
	b.mu.Lock()
	nodes := b.nodes
	b.nodes = nil
	b.next = 0
	b.mu.Unlock()
	return stopAll(nodes)
}

// Close implements Backend.
func (b *LocalBackend) Close() error {
	err := b.StopRedis()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return err
	}
	b.closed = true
	if b.pg != nil {
		err = errors.Join(err, b.pg.Stop())
		b.pg = nil
	}
	return errors.Join(err, b.clock.remove())
}

// portFree fails with a clear message when a fixed port is taken.
func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("chaos: port %d on 127.0.0.1 is in use: %w", port, err)
	}
	return l.Close()
}

type localNode struct {
	p         *testenv.RedisProcess
	clockFile string
	clock     *clockShim
}

func (n *localNode) Addr() string                      { return n.p.Addr() }
func (n *localNode) Kill() error                       { return n.p.Kill() }
func (n *localNode) Restart(ctx context.Context) error { return n.p.Restart(ctx) }
func (n *localNode) Pause() error                      { return n.p.Pause() }
func (n *localNode) Resume() error                     { return n.p.Resume() }
func (n *localNode) Stop() error                       { return n.p.Stop() }

func (n *localNode) JumpClock(offset time.Duration) error {
	if n.clockFile == "" {
		return fmt.Errorf("chaos: node %s was started without an adjustable clock", n.Addr())
	}
	return n.clock.write(n.clockFile, offset)
}

// ClockTool names what moves the node's clock.
func (n *localNode) ClockTool() string {
	if n.clock == nil {
		return ""
	}
	return n.clock.Tool()
}
