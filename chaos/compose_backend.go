package chaos

import (
	"context"
	"fmt"
	"net"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// ComposeBackend runs every server of a run in a Docker container, from the
// images compose/redlock-5.yml uses (QUORUMLOCK_REDIS_IMAGE and
// QUORUMLOCK_POSTGRES_IMAGE; by default those `make images` builds, else the
// official ones), and turns the server faults into container actions: Kill
// is docker kill, Restart a start of the same container (its filesystem,
// and so an AOF, is kept), Pause docker pause. Partitions and slow links go
// through the same in-process proxies as with the local backend, and worker
// freezes act on the worker processes, which run on this host either way.
//
// It starts one container per node rather than the fixed services of the
// compose file: each run needs fresh nodes with its own persistence,
// replication and clock settings, and the fixed services cannot change
// those without being recreated. The containers publish fixed ports on
// 127.0.0.1 and are removed by Close (or, if this process dies, by the next
// process that starts containers through internal/servers).
//
// JumpClock needs a C compiler on this host: the shim is built here and
// bind-mounted into the container, which works because the images are
// Debian bookworm, as the hosts this suite supports are.
type ComposeBackend struct {
	// TempDir is where the clock shim is built; empty means os.TempDir. The
	// Docker engine must see the same path (a local engine does).
	TempDir string

	servers
}

// NewComposeBackend returns a compose backend. Whether an engine answers is
// known at the first start, whose error then says what is missing.
func NewComposeBackend() (*ComposeBackend, error) { return &ComposeBackend{}, nil }

// Name implements Backend.
func (b *ComposeBackend) Name() string { return "compose" }

// StartRedis implements Backend.
func (b *ComposeBackend) StartRedis(ctx context.Context, spec RedisSpec) (RedisNode, error) {
	if err := b.checkOpen(); err != nil {
		return nil, err
	}
	var cfg srv.RedisConfig
	if spec.AOF {
		cfg.Persistence = srv.PersistenceAOFAlways
	}
	var opts []srv.ContainerOption
	if spec.ReplicaOf != "" {
		// The replication link runs through a proxy of this process on the
		// host's loopback, which only the host's network reaches.
		host, port, err := net.SplitHostPort(spec.ReplicaOf)
		if err != nil {
			return nil, fmt.Errorf("chaos: replica of %q: %w", spec.ReplicaOf, err)
		}
		cfg.ExtraArgs = append(cfg.ExtraArgs, "--replicaof", host, port)
		opts = append(opts, srv.WithHostNetwork())
	}
	n := &node{}
	if spec.Clock {
		// The images have no libfaketime: the shim, bind-mounted.
		env, err := b.movableClock(ctx, b.TempDir, false, n)
		if err != nil {
			return nil, err
		}
		cfg.Env = env
		// The whole directory: the offset file is replaced by a rename,
		// which a bind mount of the file itself would not follow.
		dir := n.clock.dir
		opts = append(opts, srv.WithBinds(dir+":"+dir+":ro"))
	}
	c, err := srv.StartRedisContainer(ctx, cfg, opts...)
	if err != nil {
		return nil, fmt.Errorf("chaos: start redis container: %w", err)
	}
	n.server = c
	b.add(n)
	return n, nil
}

// Postgres implements Backend.
func (b *ComposeBackend) Postgres(ctx context.Context) (Postgres, error) {
	return b.postgres(func() (pgServer, error) {
		pg, err := srv.StartPostgresContainer(ctx, srv.PostgresContainerConfig{})
		if err != nil {
			return nil, fmt.Errorf("chaos: start PostgreSQL container: %w", err)
		}
		return pg, nil
	})
}

// StartEtcd implements Backend: each member in a container of the etcd
// image (`make images`; QUORUMLOCK_ETCD_IMAGE) on the host's network, with
// the local backend's flags, ports and peer gates.
func (b *ComposeBackend) StartEtcd(ctx context.Context, n int) ([]Node, func() error, error) {
	image, err := srv.EtcdImage()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: etcd container: %w", err)
	}
	return b.startEtcd(ctx, n, image)
}

// StartZooKeeper implements Backend: each server in a container of the
// ZooKeeper image (`make images`; QUORUMLOCK_ZOOKEEPER_IMAGE) on the
// host's network, with the local backend's configuration and proxies.
func (b *ComposeBackend) StartZooKeeper(ctx context.Context, n int) ([]Node, func() error, error) {
	image, err := srv.ZooKeeperImage()
	if err != nil {
		return nil, nil, fmt.Errorf("chaos: ZooKeeper container: %w", err)
	}
	return b.startZooKeeper(ctx, n, image)
}

// StopRedis removes the node containers started so far; the PostgreSQL
// container stays up for the next run.
func (b *ComposeBackend) StopRedis() error { return b.stopRedis() }

// Close implements Backend.
func (b *ComposeBackend) Close() error { return b.close(b.StopRedis) }
