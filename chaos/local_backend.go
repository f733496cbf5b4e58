package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

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

// StartZooKeeper implements Backend: java processes on free loopback
// ports, every link between two servers through a proxy (zookeeper.go).
func (b *LocalBackend) StartZooKeeper(ctx context.Context, n int) ([]Node, func() error, error) {
	return b.startZooKeeper(ctx, n, "")
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
