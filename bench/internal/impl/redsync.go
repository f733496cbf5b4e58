package impl

import (
	"context"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// RS is go-redsync/redsync with its defaults except the expiry. It keeps one
// Mutex per key, as an application holding a named mutex would.
type RS struct {
	rs      *redsync.Redsync
	ttl     time.Duration
	clients []*redis.Client

	mu      sync.Mutex
	mutexes map[string]*redsync.Mutex
}

// NewRS builds a redsync instance over clients; Close closes them.
func NewRS(clients []*redis.Client, ttl time.Duration) *RS {
	pools := make([]rsredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = goredis.NewPool(c)
	}
	return &RS{rs: redsync.New(pools...), ttl: ttl, clients: clients, mutexes: map[string]*redsync.Mutex{}}
}

func (r *RS) Name() string { return Redsync }

// NewMutex returns a fresh Mutex for key (for contenders that each need
// their own).
func (r *RS) NewMutex(key string) *redsync.Mutex {
	return r.rs.NewMutex(key, redsync.WithExpiry(r.ttl))
}

func (r *RS) mutex(key string) *redsync.Mutex {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mutexes[key]
	if m == nil {
		m = r.NewMutex(key)
		r.mutexes[key] = m
	}
	return m
}

func (r *RS) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	m := r.mutex(key)
	if err := m.LockContext(ctx); err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := m.UnlockContext(ctx)
		return err
	}, nil
}

func (r *RS) Close() { closeAll(r.clients) }
