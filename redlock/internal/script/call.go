package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// Node runs the scripts on one Redis server. The calls of the lock's hot
// path (acquire, release, commit, extend) are prepared once per round and
// go through the node's batcher; the others (admission, bootstrap, state,
// identity) go straight to the client. Safe for concurrent use.
type Node struct {
	conn  driver.Conn
	batch *batcher
}

// NewNode returns a Node over conn; timeout bounds a pipeline of calls
// that carry no deadline.
func NewNode(conn driver.Conn, timeout time.Duration) *Node {
	return &Node{conn: conn, batch: newBatcher(conn, timeout)}
}

// call is one script call with its arguments, built once per round and
// sent to every node of it (the round's goroutines only read it): a round
// then costs the nodes' clients no argument building of their own, which
// was a third of a Lock+Release's allocations.
type call struct {
	script *Script
	nkeys  int
	cmd    []any // EVALSHA sha numkeys keys... args...
}

// init builds a call of s. Keys and arguments are given already boxed,
// so that a value used by several calls (a lock value, a ttl) is boxed
// once.
func (p *call) init(s *Script, keys []any, args ...any) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), len(keys))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	*p = call{script: s, nkeys: len(keys), cmd: cmd}
}

// split returns the keys and arguments apart, as Script.Run and the
// contract cases take them.
func (p *call) split() ([]string, []any) {
	keys := make([]string, p.nkeys)
	for i := range keys {
		keys[i] = p.cmd[3+i].(string)
	}
	return keys, p.cmd[3+p.nkeys:]
}

// do sends p: one EVALSHA with the prebuilt arguments, and the script's
// source when the node answers NOSCRIPT (a restart or a SCRIPT FLUSH
// emptied its script cache).
func (n *Node) do(ctx context.Context, p *call) (any, error) {
	return n.doUntil(ctx, p, time.Time{})
}

// doUntil is do for a call still worth sending until the time until once
// ctx has ended (batcher.doUntil). Only the batched send outlives ctx: a
// NOSCRIPT reply nobody waits for is not answered with the source.
func (n *Node) doUntil(ctx context.Context, p *call, until time.Time) (any, error) {
	v, err := n.batch.doUntil(ctx, p.cmd, until)
	if err == nil || !isNoScript(err) {
		return v, err
	}
	eval := make([]any, len(p.cmd))
	copy(eval, p.cmd)
	eval[0], eval[1] = "eval", p.script.src
	return n.conn.Do(ctx, eval...)
}

func isNoScript(err error) bool { return strings.HasPrefix(err.Error(), "NOSCRIPT") }

// Script is one of the node-side scripts: its name, source and SHA1.
type Script struct{ name, src, hash string }

// Hash is the script's SHA1, as EVALSHA names it.
func (s *Script) Hash() string { return s.hash }

// Run runs s on conn: EVALSHA, and EVAL with the source when the node
// answers NOSCRIPT. For the calls that are not on the lock's hot path.
func (s *Script) Run(ctx context.Context, conn driver.Conn, keys []string, args ...any) (any, error) {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.hash, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	cmd = append(cmd, args...)
	v, err := conn.Do(ctx, cmd...)
	if err == nil || !isNoScript(err) {
		return v, err
	}
	cmd[0], cmd[1] = "eval", s.src
	return conn.Do(ctx, cmd...)
}

// EvalArgs is the EVAL of s with keys and args (the source sent whole):
// for a pipeline, where a NOSCRIPT could not be answered by a second try.
func (s *Script) EvalArgs(keys []string, args ...any) []any {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "eval", s.src, len(keys))
	for _, k := range keys {
		cmd = append(cmd, k)
	}
	return append(cmd, args...)
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
func ByName(name string) *Script { return scripts[name] }

// SourceOf returns the Lua source of the script called name ("" for
// none): for tests that load or run it through a client of their own.
func SourceOf(name string) string { return sources[name] }

var (
	names   = map[string]string{}
	scripts = map[string]*Script{}
	sources = map[string]string{}
)

// newScript returns the script of src and records its name.
func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	s := &Script{name: name, src: src, hash: hex.EncodeToString(sum[:])}
	names[s.hash] = name
	sources[name] = src
	scripts[name] = s
	return s
}

// The replies as the scripts send them (driver's conventions): a Lua
// table is an array, a number an int64, a string a string, and false nil.

func asSlice(v any, err error) ([]any, error) {
	if err != nil {
		return nil, err
	}
	s, ok := v.([]any)
	if !ok {
		return nil, malformed("reply %T is not an array", v)
	}
	return s, nil
}

func asInt64(v any, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		i, perr := strconv.ParseInt(x, 10, 64)
		if perr != nil {
			return 0, malformed("reply %q is not an integer", x)
		}
		return i, nil
	}
	return 0, malformed("reply %T is not an integer", v)
}

func asText(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", malformed("reply %T is not a string", v)
	}
	return s, nil
}
