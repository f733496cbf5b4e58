// Package valkeyconn runs quorumlock's redlock on github.com/valkey-io/valkey-go:
// New makes a valkey-go client of one Redis or Valkey server a driver.Conn, and
// redlock.NewFromConns builds a Client over five of them (docs/drivers.md).
//
// It is a module of its own, so that the quorumlock module does not
// require valkey-go.
package valkeyconn

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// Conn is a valkey-go client of one Redis or Valkey server as a driver.Conn. Safe for
// concurrent use.
type Conn struct {
	c    valkey.Client
	addr string
}

var _ driver.Conn = (*Conn)(nil)

// New returns c as a driver.Conn. c must be a standalone client of one
// server (valkey.ClientOption with one InitAddress, and neither a cluster
// nor Sentinel): New fails for any other, since a Redlock node is one
// independent primary. The Conn uses c and does not close it: close c
// after the redlock.Client.
func New(c valkey.Client) (*Conn, error) {
	if c == nil {
		return nil, errors.New("valkeyconn: nil client")
	}
	if m := c.Mode(); m != valkey.ClientModeStandalone {
		return nil, fmt.Errorf("valkeyconn: a %s client is not one independent primary: Redlock needs one standalone client per node", m)
	}
	nodes := c.Nodes()
	if len(nodes) != 1 {
		return nil, fmt.Errorf("valkeyconn: the client reaches %d servers: Redlock needs one standalone client per node", len(nodes))
	}
	var addr string
	for a := range nodes {
		addr = a
	}
	return &Conn{c: c, addr: addr}, nil
}

// Do sends one command.
func (c *Conn) Do(ctx context.Context, args ...any) (any, error) {
	return reply(c.c.Do(ctx, c.build(args)))
}

// Pipeline sends cmds with one DoMulti.
func (c *Conn) Pipeline(ctx context.Context, cmds []driver.Cmd) {
	multi := make(valkey.Commands, len(cmds))
	for i := range cmds {
		multi[i] = c.build(cmds[i].Args)
	}
	for i, r := range c.c.DoMulti(ctx, multi...) {
		cmds[i].Val, cmds[i].Err = reply(r)
	}
}

// Addr is the server's address, as the client was given it.
func (c *Conn) Addr() string { return c.addr }

// build is args as a valkey-go command.
func (c *Conn) build(args []any) valkey.Completed {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = str(a)
	}
	return c.c.B().Arbitrary(s...).Build()
}

func str(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case uint64:
		return strconv.FormatUint(v, 10)
	case []byte:
		return string(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// reply is r by driver's conventions: a nil reply is (nil, nil), and an
// error reply a replyError.
func reply(r valkey.ValkeyResult) (any, error) {
	v, err := r.ToAny()
	if err == nil {
		return v, nil
	}
	if valkey.IsValkeyNil(err) {
		return nil, nil
	}
	if re, ok := valkey.IsValkeyErr(err); ok {
		return nil, replyError{re}
	}
	return nil, err
}

// replyError is an error reply of the server, which driver.Error matches.
type replyError struct{ err *valkey.ValkeyError }

func (e replyError) Error() string { return e.err.Error() }
func (e replyError) Unwrap() error { return e.err }
func (replyError) RedisError()     {}
