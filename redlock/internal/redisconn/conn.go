// Package redisconn is the go-redis v9 side of package driver: a
// redis.UniversalClient as a driver.Conn, which is how redlock.New runs
// on the clients it is given.
package redisconn

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// Conn is a go-redis client as a driver.Conn. Its calls go through the
// client's hooks like any other. Safe for concurrent use.
type Conn struct{ uc redis.UniversalClient }

// New returns uc as a driver.Conn.
func New(uc redis.UniversalClient) *Conn { return &Conn{uc: uc} }

// Client is the go-redis client of c.
func (c *Conn) Client() redis.UniversalClient { return c.uc }

// Do sends one command. go-redis answers a nil reply with redis.Nil,
// which driver's convention spells (nil, nil).
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	v, err := c.uc.Do(ctx, args...).Result()
	if err == redis.Nil {
		return nil, nil
	}
	return v, err
}

// Pipeline sends cmds as one go-redis pipeline.
func (c *Conn) Pipeline(ctx context.Context, cmds []driver.Cmd) {
	rcs := make([]*redis.Cmd, len(cmds))
	pipe := c.uc.Pipeline()
	for i := range cmds {
		rcs[i] = redis.NewCmd(ctx, cmds[i].Args...)
		_ = pipe.Process(ctx, rcs[i])
	}
	_, execErr := pipe.Exec(ctx)
	for i, rc := range rcs {
		cmds[i].Val, cmds[i].Err = rc.Val(), rc.Err()
		switch {
		case cmds[i].Err == redis.Nil:
			cmds[i].Err = nil
		case cmds[i].Err == nil && cmds[i].Val == nil && execErr != nil && execErr != redis.Nil:
			// A pipeline whose connection failed (a wrong password, a
			// database the node lacks) leaves its commands without a
			// reply or an error of their own.
			cmds[i].Err = execErr
		}
	}
}

// Addr is the address a *redis.Client dials (unix:// and the path for a
// socket), "" for other clients.
func (c *Conn) Addr() string {
	rc, ok := c.uc.(*redis.Client)
	if !ok {
		return ""
	}
	a := strings.TrimSpace(rc.Options().Addr)
	if a != "" && rc.Options().Network == "unix" {
		return "unix://" + a
	}
	return a
}

// Subscribe returns a go-redis PubSub with no channels; it dials on its
// first Subscribe.
func (c *Conn) Subscribe() driver.Subscription {
	return &sub{ps: c.uc.Subscribe(context.Background()), quit: make(chan struct{})}
}

// sub is a go-redis PubSub whose messages one goroutine copies into
// driver.Message values, from the first call of Messages until go-redis
// closes its channel or Close is called; it closes Messages' channel as it
// ends, so whoever reads that channel to its end has waited for it.
type sub struct {
	ps   *redis.PubSub
	once sync.Once
	msgs chan driver.Message
	quit chan struct{}
}

func (s *sub) Subscribe(ctx context.Context, ch string) error   { return s.ps.Subscribe(ctx, ch) }
func (s *sub) Unsubscribe(ctx context.Context, ch string) error { return s.ps.Unsubscribe(ctx, ch) }

func (s *sub) Messages() <-chan driver.Message {
	s.once.Do(func() {
		in := s.ps.Channel()
		s.msgs = make(chan driver.Message)
		go func() {
			defer close(s.msgs)
			for m := range in {
				select {
				case s.msgs <- driver.Message{Channel: m.Channel, Payload: m.Payload}:
				case <-s.quit:
					return
				}
			}
		}()
	})
	return s.msgs
}

// Close closes the PubSub. It does not wait for the copying goroutine:
// the Client closes its subscriptions while holding the lock its reader
// takes for each message.
func (s *sub) Close() error {
	close(s.quit)
	err := s.ps.Close()
	if errors.Is(err, redis.ErrClosed) {
		return nil
	}
	return err
}
