package impl

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/driver/rueidisconn"
	"github.com/quorumlock/quorumlock/redlock/driver/valkeyconn"
)

// Names of quorumlock's runs on the other drivers, through their adapters
// (docs/drivers.md): the same redlock.Client as Quorumlock's.
const (
	QuorumlockRueidis = "quorumlock-rueidis"
	QuorumlockValkey  = "quorumlock-valkey"
)

// QLDriver is a redlock.Client over an adapter's Conns; it owns the
// driver's clients. The command counter (CountCalls) does not see its
// calls.
type QLDriver struct {
	name   string
	C      *redlock.Client
	TTL    time.Duration
	closes []func()
}

// NewQLRueidis builds a Client over one rueidis client per address, at
// rueidis's default options.
func NewQLRueidis(addrs []string, ttl time.Duration, opts ...redlock.Option) (*QLDriver, error) {
	q := &QLDriver{name: QuorumlockRueidis, TTL: ttl}
	conns := make([]driver.Conn, len(addrs))
	for i, a := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}})
		if err != nil {
			q.Close()
			return nil, err
		}
		q.closes = append(q.closes, c.Close)
		if conns[i], err = rueidisconn.New(c); err != nil {
			q.Close()
			return nil, err
		}
	}
	return q, q.start(conns, opts)
}

// NewQLValkey builds a Client over one valkey-go client per address, at
// valkey-go's default options.
func NewQLValkey(addrs []string, ttl time.Duration, opts ...redlock.Option) (*QLDriver, error) {
	q := &QLDriver{name: QuorumlockValkey, TTL: ttl}
	conns := make([]driver.Conn, len(addrs))
	for i, a := range addrs {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{a}})
		if err != nil {
			q.Close()
			return nil, err
		}
		q.closes = append(q.closes, c.Close)
		if conns[i], err = valkeyconn.New(c); err != nil {
			q.Close()
			return nil, err
		}
	}
	return q, q.start(conns, opts)
}

func (q *QLDriver) start(conns []driver.Conn, opts []redlock.Option) error {
	c, err := redlock.NewFromConns(conns, opts...)
	if err != nil {
		q.Close()
		return err
	}
	q.C = c
	return nil
}

func (q *QLDriver) Name() string { return q.name }

func (q *QLDriver) Lock(ctx context.Context, key string) (func(context.Context) error, error) {
	l, err := q.C.Lock(ctx, key, q.TTL)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

// Close closes the redlock.Client (waiting for its background calls) and
// then the driver's clients.
func (q *QLDriver) Close() {
	if q.C != nil {
		_ = q.C.Close()
	}
	for _, c := range q.closes {
		c()
	}
}
