package impl

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxBatch bounds one pipeline, as auto-pipelining clients do, so a burst
// cannot become one huge write.
const maxBatch = 256

// PipeFloor is the many-keys floor: the commands a Redlock Lock+Release
// needs at least, with every goroutine's commands to one node sent together.
// Lock sends SET key value NX PX ttl to every node and waits for all five
// replies; Release sends a compare-and-delete script (EVALSHA, loaded at
// construction) to every node and waits for all five: two commands per node
// per operation, the protocol's one acquire and one release call. Each node
// has one sender goroutine that takes whatever commands are queued (up to
// maxBatch) and sends them as one go-redis pipeline; while that pipeline is
// out, new commands queue and go in the next one (auto-pipelining, one
// pipeline in flight per node). No retries, no waiting for a held key: a
// held key is an error (ErrHeld), since the scenario's keys are distinct.
type PipeFloor struct {
	nodes []*pipeNode
	ttl   time.Duration
	sha   string
}

type pipeNode struct {
	c    *redis.Client
	q    chan pipeReq
	done chan struct{}
}

type pipeReq struct {
	cmd redis.Cmder
	wg  *sync.WaitGroup
}

// NewPipeFloor loads the release script on every client and starts one
// sender per client; Close stops them and closes the clients.
func NewPipeFloor(ctx context.Context, clients []*redis.Client, ttl time.Duration) (*PipeFloor, error) {
	f := &PipeFloor{ttl: ttl, sha: cad.Hash()}
	for i, c := range clients {
		if err := cad.Load(ctx, c).Err(); err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("pipelined floor: loading the release script on node %d: %w", i, err)
		}
	}
	for _, c := range clients {
		n := &pipeNode{c: c, q: make(chan pipeReq, 4*maxBatch), done: make(chan struct{})}
		go n.send()
		f.nodes = append(f.nodes, n)
	}
	return f, nil
}

func (n *pipeNode) send() {
	defer close(n.done)
	batch := make([]pipeReq, 0, maxBatch)
	ctx := context.Background()
	for r := range n.q {
		batch = append(batch[:0], r)
	drain:
		for len(batch) < maxBatch {
			select {
			case r, ok := <-n.q:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		p := n.c.Pipeline()
		for _, r := range batch {
			_ = p.Process(ctx, r.cmd)
		}
		_, _ = p.Exec(ctx) // each command carries its own error
		for _, r := range batch {
			r.wg.Done()
		}
	}
}

func (f *PipeFloor) Name() string { return Floor }

// round queues one command per node, built by mk, and waits for all replies.
func (f *PipeFloor) round(mk func() redis.Cmder) []redis.Cmder {
	cmds := make([]redis.Cmder, len(f.nodes))
	var wg sync.WaitGroup
	wg.Add(len(f.nodes))
	for i, n := range f.nodes {
		cmds[i] = mk()
		n.q <- pipeReq{cmd: cmds[i], wg: &wg}
	}
	wg.Wait()
	return cmds
}

func (f *PipeFloor) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := base64.StdEncoding.EncodeToString(b[:])
	ms := f.ttl.Milliseconds()
	var errs []error
	for i, c := range f.round(func() redis.Cmder { return redis.NewStatusCmd(ctx, "set", key, v, "px", ms, "nx") }) {
		if err := c.Err(); errors.Is(err, redis.Nil) {
			errs = append(errs, fmt.Errorf("node %d: %w", i, ErrHeld))
		} else if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		}
	}
	if errs != nil {
		return nil, errors.Join(errs...)
	}
	return func(ctx context.Context) error {
		var errs []error
		for i, c := range f.round(func() redis.Cmder { return redis.NewCmd(ctx, "evalsha", f.sha, 1, key, v) }) {
			n, err := c.(*redis.Cmd).Int64()
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("node %d: %w", i, err))
			case n != 1:
				errs = append(errs, fmt.Errorf("node %d: the key no longer held our value", i))
			}
		}
		return errors.Join(errs...)
	}, nil
}

// Close stops the senders (callers must have returned) and closes the
// clients.
func (f *PipeFloor) Close() {
	for _, n := range f.nodes {
		close(n.q)
		<-n.done
		_ = n.c.Close()
	}
}
