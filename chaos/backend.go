package chaos

import (
	"context"
	"fmt"
	"time"
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
