package script

import (
	"context"
	_ "embed"
	"strconv"
	"time"
)

//go:embed acquire.lua
var acquireSrc string

var acquireScript = newScript("acquire", acquireSrc)

// AcquireArgs is one attempt's acquire call (acquire.lua).
type AcquireArgs struct {
	Key   string
	Value string        // the attempt's random value
	TTL   time.Duration // whole milliseconds
	// Settings are the deployment settings the client runs with; "" skips
	// the admission check (the lab switch labopt.WithoutRestartQuarantine).
	Settings string
	Fencing  bool   // read the key's fence and the node's clock too
	Waiter   string // the Lock call's waiter id ("" for TryLock: no line)
	Place    int64  // the waiter's place in line (see WaiterID)
	// Line is how long a waiter stays in the key's line on a node without
	// being seen again.
	Line time.Duration
	// Metadata is stored with the key where it is granted (MetaKey); ""
	// for none, which leaves the call as it was without it.
	Metadata string
}

// AcquireStatus is the acquire script's verdict on one node.
type AcquireStatus int64

const (
	Granted    AcquireStatus = 1  // SET NX succeeded (or the key already held our value)
	Held       AcquireStatus = 0  // another value holds the key
	Unadmitted AcquireStatus = -1 // the node has not served its quarantine
	Mismatch   AcquireStatus = -2 // the node was admitted under other settings
	GivenUp    AcquireStatus = -3 // this attempt's release reached the node first
	Queued     AcquireStatus = -4 // free, but a release reserved it for waiters named before this one
	HandedHere AcquireStatus = -5 // a release handed the key to this Lock call
	Ahead      AcquireStatus = -6 // held, handed to a Lock call ahead of this one in line
)

// AcquireReply is one node's answer to the acquire script.
type AcquireReply struct {
	Status AcquireStatus
	PTTL   int64  // with Held, Ahead, Queued, HandedHere: the key's (or reservation's) remaining ms; -1: no expiry
	Fence  uint64 // with Fencing and Status >= Held: the node's fence value for the key
	TimeUs uint64 // with Fencing and Status >= Held: the node's clock, µs since the epoch
	Marker string // with Mismatch: the settings the node was admitted with
	// Ident is the identity of the server that ran the call (IdentKey),
	// "" for a server with none (new, or it lost its data): a reply
	// counts only from the server its entry was proven to reach (see
	// SameServer).
	Ident string
}

// Acquire is a prepared acquire call, its arguments boxed once for every
// node of the round and for the attempt's release (see ReleaseArgs).
type Acquire struct {
	call
	args AcquireArgs
	// The boxed arguments a release of this attempt shares.
	key, value, ttl, waiter, place  any
	tomb, queue, named, seen, lined any
}

// Acquire prepares a's call.
func (b *Boxes) Acquire(a AcquireArgs) *Acquire {
	x := &Acquire{args: a}
	x.key, x.value, x.ttl, x.waiter, x.place = any(a.Key), any(a.Value), ms(&b.ttl, a.TTL), any(a.Waiter), any(a.Place)
	x.queue, x.seen, x.named, x.tomb, x.lined = any(QueueKey(a.Key)), any(SeenKey(a.Key)), any(NamedKey(a.Key)), any(TombKey(a.Value)), any(LinedKey(a.Key))
	fence, fkey := "0", x.key // KEYS[2] is only read with fencing
	if a.Fencing {
		fence, fkey = "1", FenceKey(a.Key)
	}
	keys := []any{x.key, fkey, MarkerKey, x.tomb, x.queue, x.named, x.seen, IdentKey, x.lined}
	if a.Metadata == "" {
		x.init(acquireScript, keys, x.value, x.ttl, str(&b.settings, a.Settings), fence, x.waiter, ms(&b.line, a.Line), x.place)
		return x
	}
	x.init(acquireScript, append(keys, MetaKey(a.Key)),
		x.value, x.ttl, str(&b.settings, a.Settings), fence, x.waiter, ms(&b.line, a.Line), x.place, a.Metadata)
	return x
}

// Args returns the arguments x was prepared with.
func (x *Acquire) Args() AcquireArgs { return x.args }

// Run sends the call to n.
func (x *Acquire) Run(ctx context.Context, n *Node) (AcquireReply, error) {
	res, err := asSlice(n.do(ctx, &x.call))
	if err != nil {
		return AcquireReply{}, err
	}
	return parseAcquire(res)
}

func parseAcquire(res []any) (AcquireReply, error) {
	var r AcquireReply
	if len(res) < 3 {
		return r, malformed("acquire script returned %d values", len(res))
	}
	id, ok := res[len(res)-1].(string)
	if !ok {
		return r, malformed("acquire script returned %T for the server's identity", res[len(res)-1])
	}
	r.Ident, res = id, res[:len(res)-1]
	st, ok1 := res[0].(int64)
	pt, ok2 := res[1].(int64)
	if !ok1 || !ok2 {
		return r, malformed("acquire script returned %T, %T", res[0], res[1])
	}
	r.Status, r.PTTL = AcquireStatus(st), pt
	switch {
	case r.Status == Mismatch && len(res) >= 3:
		r.Marker, _ = res[2].(string)
	case r.Status >= Held && len(res) >= 5:
		fs, _ := res[2].(string)
		f, err := strconv.ParseUint(fs, 10, 64)
		if err != nil {
			return r, malformed("fence value %q: %w", fs, err)
		}
		sec, _ := res[3].(int64)
		us, _ := res[4].(int64)
		r.Fence, r.TimeUs = f, uint64(sec)*1_000_000+uint64(us)
	}
	return r, nil
}
