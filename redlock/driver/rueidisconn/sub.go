package rueidisconn

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// Subscribe returns a Pub/Sub connection: a dedicated connection of the
// client, taken at the first Subscribe. A connection that breaks (the
// server restarted) is replaced, with the channels subscribed again, at
// the next Subscribe or Unsubscribe, not at once as go-redis does: until
// then the node's release notices are not heard, and the Client's waiters
// fall back to polling for that node.
func (c *Conn) Subscribe() driver.Subscription {
	return &sub{c: c.c, chans: map[string]bool{}, msgs: make(chan driver.Message, 64), quit: make(chan struct{})}
}

type sub struct {
	c rueidis.Client

	mu     sync.Mutex
	dc     rueidis.DedicatedClient
	hooks  <-chan error // closed when dc's hooks are called no more
	chans  map[string]bool
	closed bool

	msgs chan driver.Message
	quit chan struct{}
}

var errClosed = errors.New("rueidisconn: subscription closed")

// conn returns the live dedicated connection, making one (and subscribing
// it to every channel) when there is none or the last one broke. s.mu
// must be held.
func (s *sub) connLocked(ctx context.Context) (rueidis.DedicatedClient, error) {
	if s.closed {
		return nil, errClosed
	}
	if s.dc != nil {
		select {
		case <-s.hooks:
			// Broken: replace it, once its hooks are called no more
			// (Close closes the messages' channel after the current
			// connection's hooks only).
			s.dc.Close()
			for range s.hooks {
			}
			s.dc = nil
		default:
			return s.dc, nil
		}
	}
	dc, _ := s.c.Dedicate()
	hooks := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		select {
		case s.msgs <- driver.Message{Channel: m.Channel, Payload: m.Message}:
		case <-s.quit:
		}
	}})
	if len(s.chans) > 0 {
		chans := make([]string, 0, len(s.chans))
		for ch := range s.chans {
			chans = append(chans, ch)
		}
		if err := dc.Do(ctx, dc.B().Subscribe().Channel(chans...).Build()).Error(); err != nil {
			dc.Close()
			for range hooks {
			}
			return nil, err
		}
	}
	s.dc, s.hooks = dc, hooks
	return dc, nil
}

func (s *sub) Subscribe(ctx context.Context, ch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dc, err := s.connLocked(ctx)
	if err != nil {
		return err
	}
	if err := dc.Do(ctx, dc.B().Subscribe().Channel(ch).Build()).Error(); err != nil {
		return err
	}
	s.chans[ch] = true
	return nil
}

func (s *sub) Unsubscribe(ctx context.Context, ch string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chans, ch)
	dc, err := s.connLocked(ctx)
	if err != nil {
		return err
	}
	return dc.Do(ctx, dc.B().Unsubscribe().Channel(ch).Build()).Error()
}

func (s *sub) Messages() <-chan driver.Message { return s.msgs }

// Close closes the dedicated connection, waits until its hooks are called
// no more (a hook blocked on a full channel returns at quit), and closes
// the messages' channel.
func (s *sub) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	dc, hooks := s.dc, s.hooks
	s.mu.Unlock()
	close(s.quit)
	if dc != nil {
		dc.Close()
		for range hooks {
		}
	}
	close(s.msgs)
	return nil
}
