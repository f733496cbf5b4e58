package redlock

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// A Client over nodes of a driver other than go-redis (docs/drivers.md).

// NewFromConns returns a Client over nodes given as driver.Conns: how a
// Client runs on a driver other than go-redis v9, through an adapter
// (docs/drivers.md). It checks and does everything New does, and fails
// as New fails, except for what only a go-redis client shows: the Conns'
// types are not checked for cluster or Sentinel clients (New's probe still
// refuses a server in cluster mode or a replica), and a call that runs out
// of time names the transport errors the calls saw, not those of the
// driver's background dials. The Conns stay the caller's: Close does not
// close them.
func NewFromConns(nodes []driver.Conn, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, errors.New("redlock: NewFromConns: no nodes")
	}
	ns := make([]*node, len(nodes))
	for i, conn := range nodes {
		if conn == nil {
			return nil, fmt.Errorf("redlock: NewFromConns: node %d: nil Conn", i)
		}
		if v := reflect.ValueOf(conn); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, fmt.Errorf("redlock: NewFromConns: node %d: nil %T", i, conn)
		}
		for j := range i {
			if sameConn(nodes[j], conn) {
				return nil, fmt.Errorf("redlock: NewFromConns: nodes %d and %d are the same client", j, i)
			}
		}
		ns[i] = &node{idx: i, conn: conn, net: &transport{}}
	}
	return build("NewFromConns", ns, opts)
}

// sameConn reports whether a and b are one value (never for Conns whose
// type cannot be compared).
func sameConn(a, b driver.Conn) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}
