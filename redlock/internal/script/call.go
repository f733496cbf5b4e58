package script

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Node runs the scripts on one Redis server. The calls of the lock's hot
// path (acquire, release, commit, extend) are prepared once per round and
// go through the node's batcher; the others (admission, bootstrap, state,
// identity) go straight to the client. Safe for concurrent use.
type Node struct {
	uc    redis.UniversalClient
	batch *batcher
}

// NewNode returns a Node over uc; timeout bounds a pipeline of calls that
// carry no deadline.
func NewNode(uc redis.UniversalClient, timeout time.Duration) *Node {
	return &Node{uc: uc, batch: newBatcher(uc, timeout)}
}

// Client is the node's client, for what is not a script: INFO, Pub/Sub.
func (n *Node) Client() redis.UniversalClient { return n.uc }

// call is one script call with its arguments, built once per round and
// sent to every node of it (the round's goroutines only read it): a round
// then costs the nodes' clients no argument building of their own, which
// was a third of a Lock+Release's allocations.
type call struct {
	script *redis.Script
	nkeys  int
	cmd    []any // EVALSHA sha numkeys keys... args...
}

// init builds a call of s. Keys and arguments are given already boxed,
// so that a value used by several calls (a lock value, a ttl) is boxed
// once.
func (p *call) init(s *redis.Script, keys []any, args ...any) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), len(keys))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	*p = call{script: s, nkeys: len(keys), cmd: cmd}
}

// split returns the keys and arguments for the Script API (EVAL after a
// NOSCRIPT), which wants them apart.
func (p *call) split() ([]string, []any) {
	keys := make([]string, p.nkeys)
	for i := range keys {
		keys[i] = p.cmd[3+i].(string)
	}
	return keys, p.cmd[3+p.nkeys:]
}

// do sends p: one EVALSHA with the prebuilt arguments, and the script's
// source when the node answers NOSCRIPT (a restart emptied its script
// cache).
func (n *Node) do(ctx context.Context, p *call) *redis.Cmd {
	cmd := n.batch.do(ctx, p.cmd)
	if err := cmd.Err(); err == nil || !isNoScript(err) {
		return cmd
	}
	keys, args := p.split()
	return p.script.Eval(ctx, n.uc, keys, args...)
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// Boxes keeps script arguments boxed between calls: callers mostly use
// one ttl, and boxing an int64 for every call is an allocation each. One
// per Client; the zero value is ready. Safe for concurrent use.
type Boxes struct {
	ttl, window, line atomic.Pointer[boxedMs]
	settings          atomic.Pointer[boxedStr]
}

// boxedMs is a millisecond count and the same value boxed.
type boxedMs struct {
	ms  int64
	box any
}

type boxedStr struct {
	s   string
	box any
}

// ms returns d in whole milliseconds, boxed, reusing the box in cache
// when it holds the same count.
func ms(cache *atomic.Pointer[boxedMs], d time.Duration) any {
	v := d.Milliseconds()
	if b := cache.Load(); b != nil && b.ms == v {
		return b.box
	}
	b := &boxedMs{ms: v, box: v}
	cache.Store(b)
	return b.box
}

// str returns s boxed, reusing the box in cache when it holds s.
func str(cache *atomic.Pointer[boxedStr], s string) any {
	if b := cache.Load(); b != nil && b.s == s {
		return b.box
	}
	b := &boxedStr{s: s, box: s}
	cache.Store(b)
	return b.box
}

// micros converts a duration to the whole microseconds the scripts
// compare, rounding up so that a quarantine is never shortened.
func micros(d time.Duration) int64 {
	us := d / time.Microsecond
	if d%time.Microsecond != 0 {
		us++
	}
	return int64(us)
}

// ReplyError is a reply that is not what the script returns: the node
// answered, but not as the script would.
type ReplyError struct{ Err error }

func (e *ReplyError) Error() string { return e.Err.Error() }
func (e *ReplyError) Unwrap() error { return e.Err }

func malformed(format string, args ...any) error {
	return &ReplyError{Err: fmt.Errorf(format, args...)}
}

// NameOf names the script whose SHA1 is sha ("acquire", "release", ...;
// "" for none of quorumlock's): for tools and tests that watch the calls
// a client sends.
func NameOf(sha string) string { return names[sha] }

// ByName returns the script called name ("acquire", "release", ...; nil
// for none): for hooks that run a call they intercepted themselves.
func ByName(name string) *redis.Script { return scripts[name] }

var (
	names   = map[string]string{}
	scripts = map[string]*redis.Script{}
	sources = map[string]string{}
)

// newScript returns the script of src and records its name.
func newScript(name, src string) *redis.Script {
	s := redis.NewScript(src)
	names[s.Hash()] = name
	sources[name] = src
	scripts[name] = s
	return s
}
