package script

import (
	"context"
	_ "embed"
	"strconv"
	"time"
)

//go:embed extend.lua
var extendSrc string

var extendScript = newScript("extend", extendSrc)

// ExtendArgs is one lease's part of an extend call (extend.lua): Key's
// expiry becomes at least TTL from now where it holds Value.
type ExtendArgs struct {
	Key   string
	Value string
	TTL   time.Duration // whole milliseconds
	// Meta says the lease has metadata (MetaKey), renewed with the key
	// where it is the lease's.
	Meta bool
	// Recreate lets the node set the key again where it is missing, the
	// node is admitted with the settings given to NewExtend and holds no
	// tombstone of Value (docs/protocol.md, "Extends re-create what a
	// restart lost"). The client asks it only of a node that did not
	// renew the lease in its last round.
	Recreate bool
}

// Extend is a prepared extend call for one or many leases.
type Extend struct {
	call
	n int
}

// NewExtend prepares one call that extends every lease of ls. settings
// is the deployment settings σ the client runs with, sent only when a
// lease of ls may be re-created.
func NewExtend(ls []ExtendArgs, settings string) *Extend {
	keys := make([]any, len(ls), 2*len(ls)+2)
	args := make([]any, 0, 2*len(ls))
	meta := false
	var named []byte
	for i, l := range ls {
		keys[i] = l.Key
		args = append(args, l.Value, l.TTL.Milliseconds())
		meta = meta || l.Meta
		if l.Recreate {
			if named != nil {
				named = append(named, ' ')
			}
			named = strconv.AppendInt(named, int64(i+1), 10)
		}
	}
	// KEYS[n+1] is the node's admission marker: a node a reconfiguration
	// marked renews nothing. KEYS[n+2] is the server's identity.
	keys = append(keys, MarkerKey, IdentKey)
	if meta {
		// KEYS[n+2+i] is lease i's metadata key, for every lease: the
		// script finds it by position.
		for _, l := range ls {
			keys = append(keys, MetaKey(l.Key))
		}
	}
	if named != nil {
		// ARGV[2n+1] names the leases to re-create, then the settings;
		// their tombstones are the last KEYS.
		for _, l := range ls {
			if l.Recreate {
				keys = append(keys, TombKey(l.Value))
			}
		}
		args = append(args, string(append(append(named, '\n'), settings...)))
	}
	x := &Extend{n: len(ls)}
	x.init(extendScript, keys, args...)
	return x
}

// ExtendReply is a node's answer to an extend call: per lease in order,
// whether it was renewed, and the server's identity.
type ExtendReply struct {
	renewed []bool
	// Ident is the identity of the server that ran the call, as
	// AcquireReply's.
	Ident string
}

// Renewed reports whether the node renewed lease k (or its key already
// lived long enough); false where the key no longer holds its value.
func (r ExtendReply) Renewed(k int) bool { return r.renewed[k] }

// Run sends the call to n.
func (x *Extend) Run(ctx context.Context, n *Node) (ExtendReply, error) {
	v, err := asSlice(n.do(ctx, &x.call))
	if err != nil {
		return ExtendReply{}, err
	}
	return parseExtend(v, x.n)
}

// parseExtend reads the reply to an extend call for n leases.
func parseExtend(res []any, n int) (ExtendReply, error) {
	if len(res) != n+1 {
		return ExtendReply{}, malformed("extend script returned %d results for %d keys", len(res), n)
	}
	id, ok := res[n].(string)
	if !ok {
		return ExtendReply{}, malformed("extend script returned %T for the server's identity", res[n])
	}
	r := ExtendReply{renewed: make([]bool, n), Ident: id}
	for k, v := range res[:n] {
		i, ok := v.(int64)
		if !ok {
			return ExtendReply{}, malformed("extend script returned %T for lease %d", v, k)
		}
		r.renewed[k] = i == 1
	}
	return r, nil
}
