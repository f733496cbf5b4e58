package impl

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// FloorLocker is the network floor of a five-node lock: "Lock" and
// "Release" are each one round of PING sent to every node at once, one
// goroutine per node, waiting for all of them. Any Redlock client needs at
// least one parallel round to acquire and one to release.
type FloorLocker struct {
	clients []*redis.Client
}

// NewFloor pings clients, which Close closes.
func NewFloor(clients []*redis.Client) *FloorLocker { return &FloorLocker{clients: clients} }

func (f *FloorLocker) Name() string { return Floor }

// Round sends one PING to every node in parallel and waits for all replies.
func (f *FloorLocker) Round(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(f.clients))
	for i, c := range f.clients {
		wg.Go(func() { errs[i] = c.Ping(ctx).Err() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (f *FloorLocker) Lock(ctx context.Context, _ string) (func(context.Context) error, error) {
	if err := f.Round(ctx); err != nil {
		return nil, err
	}
	return f.Round, nil
}

func (f *FloorLocker) Close() { closeAll(f.clients) }
