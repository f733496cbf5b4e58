package redlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fakeNode is a test double behind redis.Scripter: an in-memory key space
// that runs the client's scripts as Go code. Faults are injected by
// wrapping: fail makes every call return an error, hold makes calls block
// until released or their context ends (a frozen node that honours ctx).
type fakeNode struct {
	mu    sync.Mutex
	vals  map[string]string
	exp   map[string]time.Time
	now   func() time.Time
	calls atomic.Int64
	ended atomic.Int64 // calls that have returned

	fail  atomic.Pointer[error]
	hold  atomic.Pointer[chan struct{}]
	delay atomic.Int64 // ns added to every call

	node *node // the client's view of this fake

	failMu  sync.Mutex
	failing map[string]error // script name -> error it returns
}

// failScript makes one script fail on this node (err nil: succeed again).
func (f *fakeNode) failScript(name string, err error) {
	f.failMu.Lock()
	defer f.failMu.Unlock()
	if f.failing == nil {
		f.failing = map[string]error{}
	}
	f.failing[name] = err
}

func newFakeNode() *fakeNode {
	return &fakeNode{vals: map[string]string{}, exp: map[string]time.Time{}, now: time.Now}
}

func (f *fakeNode) freeze() chan struct{} {
	ch := make(chan struct{})
	f.hold.Store(&ch)
	return ch
}

func (f *fakeNode) thaw() {
	if ch := f.hold.Swap(nil); ch != nil {
		close(*ch)
	}
}

func (f *fakeNode) setErr(err error) { f.fail.Store(&err) }

func (f *fakeNode) get(key string) (string, bool) {
	if e, ok := f.exp[key]; ok && !f.now().Before(e) {
		delete(f.vals, key)
		delete(f.exp, key)
	}
	v, ok := f.vals[key]
	return v, ok
}

// Get reads a key as a test would with GET.
func (f *fakeNode) Get(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(key)
}

var scriptsBySHA = map[string]string{
	acquireScript.Hash(): "acquire", releaseScript.Hash(): "release", extendScript.Hash(): "extend",
	commitScript.Hash(): "commit", pendingScript.Hash(): "pending", admitScript.Hash(): "admit",
	recordScript.Hash(): "record",
}

func (f *fakeNode) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	f.calls.Add(1)
	defer f.ended.Add(1)
	if d := f.delay.Load(); d > 0 {
		select {
		case <-time.After(time.Duration(d)):
		case <-ctx.Done():
			return redis.NewCmdResult(nil, ctx.Err())
		}
	}
	if ch := f.hold.Load(); ch != nil {
		select {
		case <-*ch:
		case <-ctx.Done():
			return redis.NewCmdResult(nil, ctx.Err())
		}
	}
	if err := f.fail.Load(); err != nil && *err != nil {
		return redis.NewCmdResult(nil, *err)
	}
	name, ok := scriptsBySHA[sha]
	if !ok {
		return redis.NewCmdResult(nil, errors.New("NOSCRIPT"))
	}
	f.failMu.Lock()
	ferr := f.failing[name]
	f.failMu.Unlock()
	if ferr != nil {
		return redis.NewCmdResult(nil, ferr)
	}
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = fmt.Sprint(a)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return redis.NewCmdResult(f.run(name, keys, s))
}

func (f *fakeNode) run(name string, k, a []string) (any, error) {
	switch name {
	case "acquire":
		if a[2] == "1" {
			if _, ok := f.get(markerKey); !ok {
				return []any{int64(-1), int64(0), "0", int64(0), int64(0)}, nil
			}
		}
		st, pttl := int64(1), int64(0)
		if _, ok := f.get(k[0]); ok {
			st = 0
			pttl = int64(f.exp[k[0]].Sub(f.now()) / time.Millisecond)
		} else {
			ms, _ := strconv.Atoi(a[1])
			f.vals[k[0]] = a[0]
			f.exp[k[0]] = f.now().Add(time.Duration(ms) * time.Millisecond)
		}
		if a[3] != "1" {
			return []any{st, pttl}, nil
		}
		fence, ok := f.get(k[1])
		if !ok {
			fence = "0"
		}
		us := f.now().UnixMicro()
		return []any{st, pttl, fence, us / 1e6, us % 1e6}, nil
	case "release":
		if v, ok := f.get(k[0]); ok && v == a[0] {
			delete(f.vals, k[0])
			delete(f.exp, k[0])
			return int64(1), nil
		}
		return int64(0), nil
	case "extend":
		if v, ok := f.get(k[0]); ok && v == a[0] {
			ms, _ := strconv.Atoi(a[1])
			f.exp[k[0]] = f.now().Add(time.Duration(ms) * time.Millisecond)
			return int64(1), nil
		}
		return int64(0), nil
	case "commit":
		if v, ok := f.get(k[0]); !ok || v != a[0] {
			return int64(0), nil
		}
		cur, _ := f.get(k[1])
		c, _ := strconv.ParseUint(cur, 10, 64)
		t, _ := strconv.ParseUint(a[1], 10, 64)
		if t > c {
			f.vals[k[1]] = a[1]
		}
		return int64(1), nil
	case "pending":
		if m, ok := f.get(k[0]); ok {
			return []any{int64(1), m}, nil
		}
		now := strconv.FormatInt(f.now().UnixMicro(), 10)
		if _, ok := f.get(k[1]); !ok {
			f.vals[k[1]] = a[0] + ":" + now
		}
		p, _ := f.get(k[1])
		return []any{int64(0), p, now}, nil
	case "admit":
		if _, ok := f.get(k[0]); ok {
			return int64(1), nil
		}
		if a[1] == "1" {
			p, _ := f.get(k[1])
			_, st, _ := strings.Cut(a[0], ":")
			stamp, _ := strconv.ParseInt(st, 10, 64)
			q, _ := strconv.ParseInt(a[2], 10, 64)
			if p != a[0] || f.now().UnixMicro()-stamp < q {
				return int64(0), nil
			}
		}
		f.vals[k[0]] = a[0]
		delete(f.vals, k[1])
		return int64(1), nil
	case "record":
		field := k[0] + "\x00" + a[1]
		if a[0] == "set" {
			f.vals[field] = a[2]
			return int64(1), nil
		}
		if _, ok := f.vals[field]; ok {
			return int64(1), nil
		}
		return int64(0), nil
	}
	return nil, fmt.Errorf("unknown script %s", name)
}

func (f *fakeNode) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return f.EvalSha(ctx, redis.NewScript(src).Hash(), keys, args...)
}

func (f *fakeNode) EvalRO(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	return f.Eval(ctx, src, keys, args...)
}

func (f *fakeNode) EvalShaRO(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	return f.EvalSha(ctx, sha, keys, args...)
}

func (f *fakeNode) ScriptExists(context.Context, ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceResult([]bool{true}, nil)
}

func (f *fakeNode) ScriptLoad(context.Context, string) *redis.StringCmd {
	return redis.NewStringResult("", nil)
}

// fakeCluster builds a Client over n fake nodes.
func fakeCluster(n int, opts ...Option) (*Client, []*fakeNode, error) {
	fs := make([]*fakeNode, n)
	ns := make([]*node, n)
	for i := range fs {
		fs[i] = newFakeNode()
		ns[i] = &node{idx: i, name: fmt.Sprintf("fake-%d", i), sc: fs[i]}
		fs[i].node = ns[i]
	}
	c, err := newClient(ns, opts)
	return c, fs, err
}

// missed is set by the test cluster's client; see fakeCluster.
func (f *fakeNode) missed() bool { return f.node.missed.Load() }

// set writes key as another client would; ttl 0 keeps any expiry it had.
func (f *fakeNode) set(key, val string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vals[key] = val
	if ttl > 0 {
		f.exp[key] = f.now().Add(ttl)
	}
}
