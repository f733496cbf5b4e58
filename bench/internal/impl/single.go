package impl

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// cad deletes the key only while it holds our value.
var cad = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// ErrHeld is the single-node baseline's "someone else has it".
var ErrHeld = errors.New("single-node: held")

// Single is the least a lock on one node can do: SET key value NX PX, and
// a Lua compare-and-delete (EVALSHA) to release. One attempt, no retries.
type Single struct {
	c   *redis.Client
	ttl time.Duration
}

// NewSingle locks on c, which Close closes.
func NewSingle(c *redis.Client, ttl time.Duration) *Single { return &Single{c: c, ttl: ttl} }

func (s *Single) Name() string { return SingleNode }

func (s *Single) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	v := base64.StdEncoding.EncodeToString(b[:])
	ok, err := s.c.SetNX(ctx, key, v, s.ttl).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrHeld
	}
	return func(ctx context.Context) error {
		return cad.Run(ctx, s.c, []string{key}, v).Err()
	}, nil
}

func (s *Single) Close() { _ = s.c.Close() }
