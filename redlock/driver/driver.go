// Package driver defines what package redlock needs of a Redis client, so
// that a Client can run on any Go Redis driver: one connection pool to one
// Redis server (a Conn), able to send a command, a pipeline of commands,
// and to open a Pub/Sub connection. go-redis v9 clients are used through
// redlock.New directly; the rueidis and valkey-go adapters live in modules
// of their own (docs/drivers.md), and an adapter for another driver is a
// few dozen lines that keep the conventions below.
//
// # Replies
//
// A reply is returned as a plain Go value: an integer as int64, a bulk,
// simple or verbatim string as string, an array or a set as []any, a map
// as map[any]any, map[string]any or an []any of alternating keys and
// values, and a nil reply (a missing key, a script's false) as the value
// nil with a nil error. An error reply of the server is returned as an
// error that satisfies Error (go-redis's already do); an error reply
// inside an array may stay in the array as such an error value. Any other
// error (a dial that failed, a broken connection, a ctx that ended) is a
// transport error and must not satisfy Error: the Client counts a node
// that answered with an error reply as up, and one with a transport error
// as down.
package driver

import "context"

// Conn is one Redis server as a Client reaches it: a pool of connections
// to one primary (not a cluster, ring or Sentinel client, which spread keys
// over servers or follow failovers that lose granted locks). Arguments are
// strings, and integers (int, int64) that the Conn sends in decimal. Every
// method is called from many goroutines at once and must be safe for
// concurrent use; each must return once ctx ends.
type Conn interface {
	// Do sends one command (its name, then its arguments) and returns
	// its reply.
	Do(ctx context.Context, args ...any) (any, error)
	// Pipeline sends cmds together and waits for their replies. When it
	// returns, every Cmd holds its reply in Val, or its error in Err; a
	// command the pipeline could not send holds the pipeline's error.
	Pipeline(ctx context.Context, cmds []Cmd)
	// Subscribe returns a new Pub/Sub connection with no channels yet.
	// It need not dial: its first Subscribe may.
	Subscribe() Subscription
	// Addr is the server's address as configured (host:port, or unix://
	// and a socket's path), "" if the driver cannot tell. The Client names
	// the node by it, and refuses two Conns with the same address.
	Addr() string
}

// Cmd is one command of a pipeline: Args as Conn.Do takes them, and the
// reply (Val, Err) that Conn.Pipeline fills in.
type Cmd struct {
	Args []any
	Val  any
	Err  error
}

// Subscription is a Pub/Sub connection. Subscribe and Unsubscribe return
// once the command is sent (or confirmed) or ctx ends; the Client calls
// them from one goroutine, reads Messages from another until the channel
// is closed, and may call Close (once) from a third while a Subscribe is
// under way. A connection that breaks should subscribe its channels again
// on a new one, at once or at the next Subscribe or Unsubscribe.
type Subscription interface {
	Subscribe(ctx context.Context, channel string) error
	Unsubscribe(ctx context.Context, channel string) error
	// Messages returns the channel of the messages published on the
	// subscribed channels; it is closed after Close. Every call returns
	// the same channel.
	Messages() <-chan Message
	// Close ends the subscription and releases its connection.
	Close() error
}

// Message is one Pub/Sub message.
type Message struct {
	Channel string
	Payload string
}

// Error is an error reply of the server ("NOPERM ...", "NOSCRIPT ...",
// "OOM ..."): match it with errors.As. It is the method set of go-redis's
// redis.Error, so go-redis's replies need no wrapping.
type Error interface {
	error
	RedisError()
}
