package impl

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// QL is quorumlock's redlock.Client.
type QL struct {
	C       *redlock.Client
	TTL     time.Duration
	clients []*redis.Client // owned, closed by Close; nil when shared
}

// NewQL builds a redlock.Client over clients. With own set, Close also
// closes the clients.
func NewQL(clients []*redis.Client, own bool, ttl time.Duration, opts ...redlock.Option) (*QL, error) {
	c, err := redlock.New(Universal(clients), opts...)
	if err != nil {
		return nil, err
	}
	q := &QL{C: c, TTL: ttl}
	if own {
		q.clients = clients
	}
	return q, nil
}

func (q *QL) Name() string { return Quorumlock }

func (q *QL) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := q.C.Lock(ctx, key, q.TTL)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// Close closes the redlock.Client (waiting for its background calls) and
// then the clients it owns.
func (q *QL) Close() {
	_ = q.C.Close()
	closeAll(q.clients)
}
