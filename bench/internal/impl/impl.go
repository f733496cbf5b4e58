// Package impl wraps the lock implementations the benchmark compares behind
// one shape: a Lock+Release operation on a key.
package impl

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Names used in the report and the JSON (docs/performance.md).
const (
	Quorumlock = "quorumlock"
	Redsync    = "redsync"
	SingleNode = "single-node"
	Floor      = "floor"
)

// Locker takes and gives up a lock on a key. For the floor, Lock and
// Release are each one parallel PING round with nothing locked.
type Locker interface {
	Name() string
	// Lock blocks until the lock is held or ctx ends; the returned release
	// function gives it up.
	Lock(ctx context.Context, key string) (release func(context.Context) error, err error)
	Close()
}

// Clients returns one go-redis client per address, at go-redis's default
// options (as the libraries' READMEs configure them), so that a frozen node
// costs what it costs a typical user: ReadTimeout (5 s) per call, since
// default clients do not honour context deadlines on the socket.
func Clients(addrs []string) []*redis.Client {
	cs := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		cs[i] = redis.NewClient(&redis.Options{Addr: a})
		if CountCalls.Load() {
			cs[i].AddHook(counter{})
		}
	}
	return cs
}

// CountCalls makes Clients count every command sent (Calls), to compare
// round trips per operation. Off by default: the hook costs a little.
var CountCalls atomic.Bool

var calls atomic.Int64

// Calls returns the number of commands sent so far by clients made while
// CountCalls was set (a pipeline counts each command).
func Calls() int64 { return calls.Load() }

type counter struct{}

func (counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		calls.Add(1)
		return next(ctx, cmd)
	}
}

func (counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		calls.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// Universal converts clients to the interface redlock.New takes.
func Universal(cs []*redis.Client) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// Op runs one Lock+Release and returns its latency.
func Op(ctx context.Context, l Locker, key string) (time.Duration, error) {
	t0 := time.Now()
	rel, err := l.Lock(ctx, key)
	if err != nil {
		return time.Since(t0), err
	}
	err = rel(ctx)
	return time.Since(t0), err
}
