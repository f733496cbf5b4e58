package script

import (
	"context"
	_ "embed"
	"time"
)

//go:embed release.lua
var releaseSrc string

var releaseScript = newScript("release", releaseSrc)

// ReleaseArgs is one release call (release.lua): a lease's Release, a
// failed attempt's cleanup, a Lock call leaving the key's line, or giving
// handed keys back under a new id.
type ReleaseArgs struct {
	Key string
	// Value is deleted where the key holds it. Leaving the line uses a
	// fresh value nobody holds.
	Value string
	// Tomb is how long a tombstone for Value is left where the key is not
	// ours, against an acquire of Value still on its way; 0: none.
	Tomb time.Duration
	// Waiter is the Lock call's waiter id ("" for none). Without Back it
	// leaves the line (and any reservation that names it), and a key
	// handed to it is deleted like Value.
	Waiter string
	// Window is how long the free key is reserved for the waiter the
	// release names.
	Window time.Duration
	// Back puts Waiter back in line at Place instead: a failed attempt's
	// cleanup, whose call goes on waiting.
	Back  bool
	Place int64
	Line  time.Duration // how long the line is kept (AcquireArgs.Line)
	// Next, for a give-back, is the call's new waiter id: it takes Place
	// in line before anything handed to Waiter is handed on.
	Next string
	// Meta deletes the key's holder metadata (MetaKey) with the key.
	Meta bool

	from *Acquire // the attempt whose boxed arguments this call shares
}

// ReleaseArgs returns the release of x's value: its key, value, waiter
// and place, with a tombstone as long as its ttl (the longest its acquire
// could still hold the key if it landed after the release).
func (x *Acquire) ReleaseArgs() ReleaseArgs {
	a := x.args
	return ReleaseArgs{Key: a.Key, Value: a.Value, Tomb: a.TTL, Waiter: a.Waiter, Place: a.Place, Line: a.Line, Meta: a.Metadata != "", from: x}
}

// Standalone returns r without the attempt whose boxed arguments it
// shares: a lease keeps its release this way for as long as it is held,
// and not the attempt's call with it. A call prepared from it boxes its
// own arguments.
func (r ReleaseArgs) Standalone() ReleaseArgs {
	r.from = nil
	return r
}

// Release is a prepared release call.
type Release struct{ call }

// Release prepares r's call. Arguments equal to those of the attempt r
// was made from (Acquire.ReleaseArgs) reuse its boxes.
func (b *Boxes) Release(r ReleaseArgs) *Release {
	var key, value, tomb, waiter, place, queue, named, seen, lined, tombKey any
	if f := r.from; f != nil {
		if r.Key == f.args.Key {
			key, queue, named, seen, lined = f.key, f.queue, f.named, f.seen, f.lined
		}
		if r.Value == f.args.Value {
			value, tombKey = f.value, f.tomb
		}
		if r.Tomb == f.args.TTL {
			tomb = f.ttl
		}
		if r.Waiter == f.args.Waiter {
			waiter = f.waiter
		}
		if r.Place == f.args.Place {
			place = f.place
		}
	}
	if key == nil {
		key, queue, named, seen, lined = any(r.Key), any(QueueKey(r.Key)), any(NamedKey(r.Key)), any(SeenKey(r.Key)), any(LinedKey(r.Key))
	}
	if value == nil {
		value, tombKey = any(r.Value), any(TombKey(r.Value))
	}
	if tomb == nil {
		tomb = r.Tomb.Milliseconds()
	}
	if waiter == nil {
		waiter = any(r.Waiter)
	}
	// ARGV[6]: the place to go back to, or '' to leave the line.
	var back any = ""
	if r.Back && r.Waiter != "" {
		if place == nil {
			place = any(r.Place)
		}
		back = place
	}
	x := &Release{}
	keys := []any{key, tombKey, queue, named, seen, MarkerKey, IdentKey, lined}
	if r.Meta {
		keys = append(keys, MetaKey(r.Key))
	}
	args := []any{value, ReleaseChannel(r.Key), tomb, waiter, ms(&b.window, r.Window), back, ms(&b.line, r.Line), wakePrefix}
	if r.Next != "" {
		args = append(args, r.Next, r.Place)
	}
	x.init(releaseScript, keys, args...)
	return x
}

// Run sends the call to n. It reports whether the node deleted the key:
// it held Value (or, for a Waiter that leaves, a key handed to it).
func (x *Release) Run(ctx context.Context, n *Node) (bool, error) {
	return x.RunUntil(ctx, n, time.Time{})
}

// RunUntil is Run for a release whose key may exist until the time until:
// a call still waiting in n's queue when ctx ends goes out anyway, as long
// as until has not passed, and its reply is dropped. A lease's Release
// uses it, so that giving up on the replies (the cleanup timeout, in a
// flood of releases or behind a slow node) does not leave the key held for
// its ttl.
func (x *Release) RunUntil(ctx context.Context, n *Node, until time.Time) (bool, error) {
	v, err := asInt64(n.doUntil(ctx, &x.call, until))
	return v == 1, err
}
