package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
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
// The script contract table (contract_test.go) runs the same cases against
// it and against a real redis-server, so the Go copies cannot drift from
// the Lua.
type fakeNode struct {
	mu     sync.Mutex
	vals   map[string]string
	hashes map[string]map[string]string
	zsets  map[string]map[string]int64 // member -> score
	exp    map[string]time.Time
	now    func() time.Time
	calls  atomic.Int64
	ended  atomic.Int64 // calls that have returned

	fail  atomic.Pointer[error]
	hold  atomic.Pointer[chan struct{}]
	delay atomic.Int64 // ns added to every call

	node *node // the client's view of this fake

	extendCalls int64          // extend script calls, guarded by mu
	published   []message      // release notices, guarded by mu
	listeners   map[string]int // subscribers per channel, guarded by mu (PUBLISH's count)

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
	return &fakeNode{vals: map[string]string{}, hashes: map[string]map[string]string{}, zsets: map[string]map[string]int64{},
		exp: map[string]time.Time{}, now: time.Now}
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

// expire drops key if its expiry has passed, as Redis does on access.
func (f *fakeNode) expire(key string) {
	if e, ok := f.exp[key]; ok && !f.now().Before(e) {
		delete(f.vals, key)
		delete(f.hashes, key)
		delete(f.zsets, key)
		delete(f.exp, key)
	}
}

func (f *fakeNode) get(key string) (string, bool) {
	f.expire(key)
	v, ok := f.vals[key]
	return v, ok
}

func (f *fakeNode) exists(key string) bool {
	f.expire(key)
	_, s := f.vals[key]
	_, h := f.hashes[key]
	_, z := f.zsets[key]
	return s || h || z
}

func (f *fakeNode) del(key string) {
	delete(f.vals, key)
	delete(f.hashes, key)
	delete(f.zsets, key)
	delete(f.exp, key)
}

// zset returns key's sorted set, creating it when create is set.
func (f *fakeNode) zset(key string, create bool) map[string]int64 {
	f.expire(key)
	z := f.zsets[key]
	if z == nil && create {
		z = map[string]int64{}
		f.zsets[key] = z
	}
	return z
}

// zrem removes member; an emptied set is removed, as Redis does.
func (f *fakeNode) zrem(key, member string) {
	z := f.zset(key, false)
	delete(z, member)
	if z != nil && len(z) == 0 {
		f.del(key)
	}
}

// message is one PUBLISH: the channel and the payload.
type message struct{ channel, payload string }

// zprune drops the members of a line that were last seen (seen's score)
// lineMs or more ago, from both sets, and those with no last sight (an
// older client's) whose place is as old (the scripts' drop).
func (f *fakeNode) zprune(line, seen string, lineMs int64) {
	cut := f.nowUs() - lineMs*1000
	last := f.zset(seen, false)
	for m, at := range last {
		if at <= cut {
			f.zrem(line, m)
			f.zrem(seen, m)
		}
	}
	last = f.zset(seen, false)
	for m, place := range f.zset(line, false) {
		if _, ok := last[m]; !ok && place <= cut {
			f.zrem(line, m)
		}
	}
}

// zleave takes member out of a line, and its last sight with it.
func (f *fakeNode) zleave(line, seen, member string) {
	if _, ok := f.zset(line, false)[member]; ok {
		f.zrem(line, member)
		f.zrem(seen, member)
	}
}

// zplace is ZADD NX line place member and ZADD seen now member, then
// PEXPIRE ms on both (the scripts' join and "back in place").
func (f *fakeNode) zplace(line, seen, member string, place, ms int64) {
	f.zadd(line, member, place, ms)
	f.zset(seen, true)[member] = f.nowUs()
	f.exp[seen] = f.now().Add(time.Duration(ms) * time.Millisecond)
}

// zfirst returns up to n members in score order (then by member).
func (f *fakeNode) zfirst(key string, n int) []string {
	z := f.zset(key, false)
	ms := make([]string, 0, len(z))
	for m := range z {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b string) int {
		if c := cmp.Compare(z[a], z[b]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return ms[:min(n, len(ms))]
}

// pttl is PTTL: -2 without the key, -1 without an expiry.
func (f *fakeNode) pttl(key string) int64 {
	if !f.exists(key) {
		return -2
	}
	e, ok := f.exp[key]
	if !ok {
		return -1
	}
	return int64(e.Sub(f.now()) / time.Millisecond)
}

// setStr is SET key val [PX ms] (ms 0: no expiry).
func (f *fakeNode) setStr(key, val string, ms int64) {
	f.del(key)
	f.vals[key] = val
	if ms > 0 {
		f.exp[key] = f.now().Add(time.Duration(ms) * time.Millisecond)
	}
}

func (f *fakeNode) hmget(key string, fields ...string) []any {
	f.expire(key)
	out := make([]any, len(fields))
	for i, fl := range fields {
		if v, ok := f.hashes[key][fl]; ok {
			out[i] = v
		}
	}
	return out
}

// zadd is ZADD NX key score member, then PEXPIRE key ms.
func (f *fakeNode) zadd(key, member string, score, ms int64) {
	z := f.zset(key, true)
	if _, ok := z[member]; !ok {
		z[member] = score
	}
	f.exp[key] = f.now().Add(time.Duration(ms) * time.Millisecond)
}

// nowUs is the node's TIME in microseconds.
func (f *fakeNode) nowUs() int64 { return f.now().UnixMicro() }

// Get reads a key as a test would with GET.
func (f *fakeNode) Get(key string) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.get(key)
}

var scriptsBySHA = map[string]string{
	acquireScript.Hash(): "acquire", releaseScript.Hash(): "release", extendScript.Hash(): "extend",
	commitScript.Hash(): "commit", pendingScript.Hash(): "pending", admitScript.Hash(): "admit",
	bootstrapScript.Hash(): "bootstrap", stateScript.Hash(): "state", identScript.Hash(): "ident",
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

// run is the Go copy of each script in lua/; the comments there say what
// they do. A nil reply is redis.Nil, as go-redis reports it.
func (f *fakeNode) run(name string, k, a []string) (any, error) {
	atoi := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	switch name {
	case "acquire":
		if a[2] != "" {
			m, ok := f.get(k[2])
			if !ok {
				return []any{int64(-1), int64(0)}, nil
			}
			if m != a[2] {
				return []any{int64(-2), int64(0), m}, nil
			}
		}
		if f.exists(k[3]) {
			return []any{int64(-3), int64(0)}, nil
		}
		id := a[4]
		join := func() {
			if id != "" {
				f.zprune(k[4], k[6], atoi(a[5]))
				f.zplace(k[4], k[6], id, atoi(a[6]), atoi(a[5]))
			}
		}
		if named, ok := f.get(k[5]); ok && (id == "" || !slices.Contains(strings.Fields(named), id)) {
			join()
			return []any{int64(-4), f.pttl(k[5])}, nil
		}
		st, pttl := int64(1), int64(0)
		if v, ok := f.get(k[0]); ok {
			switch {
			case id != "" && v == id:
				return []any{int64(-5), f.pttl(k[0])}, nil // handed to this Lock call
			case v != a[0]:
				st, pttl = 0, f.pttl(k[0])
				if strings.Contains(id, "+") {
					if p, ok := waiterPlace(v); ok {
						if p < atoi(a[6]) {
							st = -6
						}
					}
				}
			}
		} else {
			f.setStr(k[0], a[0], atoi(a[1]))
		}
		if st == 1 {
			f.del(k[5])
			if id != "" {
				f.zleave(k[4], k[6], id)
			}
		} else {
			join()
		}
		if a[3] != "1" {
			return []any{st, pttl}, nil
		}
		fence, ok := f.get(k[1])
		if !ok {
			fence = "0"
		}
		us := f.nowUs()
		return []any{st, pttl, fence, us / 1e6, us % 1e6}, nil
	case "release":
		cur, held := f.get(k[0])
		cleaning := a[3] != "" && a[5] != ""
		handoff := func(tellAll bool) {
			f.zprune(k[2], k[4], atoi(a[6]))
			first := f.zfirst(k[2], 1)
			if len(first) == 0 {
				if tellAll {
					f.published = append(f.published, message{a[1], ""})
				}
				return
			}
			w := first[0]
			for try := 0; ; try++ {
				f.zleave(k[2], k[4], w)
				cid, _, dotted := strings.Cut(w, ".")
				i := strings.LastIndexByte(w, '+')
				if i < 0 || !dotted || cid == "" || len(a) < 8 || f.exists(k[0]) || atoi(w[i+1:]) <= 0 {
					break
				}
				// a waiter that takes the key itself, if its Client listens
				f.published = append(f.published, message{a[7] + cid, "!" + w + "|" + k[0]})
				if f.listeners[a[7]+cid] > 0 {
					f.setStr(k[0], w, atoi(w[i+1:]))
					return
				}
				next := f.zfirst(k[2], 1)
				if len(next) == 0 || try == 3 {
					if tellAll {
						f.published = append(f.published, message{a[1], ""})
					}
					return
				}
				w = next[0]
			}
			cid, _, dotted := strings.Cut(w, ".")
			f.setStr(k[3], w, atoi(a[4]))
			if cleaning && w == a[3] {
				return // kept for the cleaning call, which is not told
			}
			if dotted && cid != "" && len(a) >= 8 {
				f.published = append(f.published, message{a[7] + cid, w + "|" + k[0]})
			} else {
				f.published = append(f.published, message{a[1], w})
			}
		}
		if len(a) >= 10 {
			f.zplace(k[2], k[4], a[8], atoi(a[9]), atoi(a[6]))
		}
		if a[3] != "" {
			if a[5] != "" {
				f.zplace(k[2], k[4], a[3], atoi(a[5]), atoi(a[6]))
			} else {
				f.zleave(k[2], k[4], a[3])
				if named, ok := f.get(k[3]); ok {
					names := strings.Fields(named)
					if slices.Contains(names, a[3]) {
						rest := slices.DeleteFunc(names, func(w string) bool { return w == a[3] })
						if pttl := f.pttl(k[3]); len(rest) == 0 || pttl <= 0 {
							f.del(k[3])
							if !held {
								handoff(false)
							}
						} else {
							f.setStr(k[3], strings.Join(rest, " "), pttl)
						}
					}
				}
			}
		}
		if held && (cur == a[0] || (a[3] != "" && a[5] == "" && cur == a[3])) {
			f.del(k[0])
			handoff(!cleaning)
			return int64(1), nil
		}
		if a[2] != "0" {
			f.setStr(k[1], "1", atoi(a[2]))
		}
		return int64(0), nil
	case "extend":
		f.extendCalls++
		out := make([]any, len(k))
		for i, key := range k {
			out[i] = int64(0)
			if v, ok := f.get(key); ok && v == a[2*i] {
				if ms := atoi(a[2*i+1]); f.pttl(key) < ms {
					f.exp[key] = f.now().Add(time.Duration(ms) * time.Millisecond)
				}
				out[i] = int64(1)
			}
		}
		return out, nil
	case "commit":
		if v, ok := f.get(k[0]); !ok || v != a[0] {
			return int64(0), nil
		}
		cur, ok := f.get(k[1])
		keep, pttl := atoi(a[2]), f.pttl(k[1])
		if !ok || len(cur) < len(a[1]) || (len(cur) == len(a[1]) && cur < a[1]) {
			f.vals[k[1]] = a[1]
			f.exp[k[1]] = f.now().Add(time.Duration(max(keep, pttl)) * time.Millisecond)
		} else if pttl < keep {
			f.exp[k[1]] = f.now().Add(time.Duration(keep) * time.Millisecond)
		}
		return int64(1), nil
	case "pending":
		if m, ok := f.get(k[0]); ok {
			return []any{int64(1), m}, nil
		}
		now := strconv.FormatInt(f.nowUs(), 10)
		p := f.hmget(k[1], "id", "stamp", "settings", "quarantine")
		if p[0] == nil || (a[4] == "1" && p[2] != a[1]) {
			f.hashes[k[1]] = map[string]string{"id": a[0], "stamp": now, "settings": a[1], "quarantine": a[2]}
			f.exp[k[1]] = f.now().Add(time.Duration(atoi(a[3])) * time.Millisecond)
			p = []any{a[0], now, a[1], a[2]}
		}
		return []any{int64(0), p[0], p[1], p[2], p[3], now}, nil
	case "admit":
		if m, ok := f.get(k[0]); ok {
			if m == a[1] {
				return int64(1), nil
			}
			return int64(-2), nil
		}
		p := f.hmget(k[1], "id", "stamp", "settings", "quarantine")
		if p[0] != a[0] || p[2] != a[1] {
			return int64(0), nil
		}
		if f.nowUs()-atoi(p[1].(string)) < atoi(p[3].(string)) {
			return int64(0), nil
		}
		f.setStr(k[0], a[1], 0)
		f.del(k[1])
		return int64(1), nil
	case "bootstrap":
		if m, ok := f.get(k[0]); ok {
			if m == a[1] {
				return int64(2), nil
			}
			return int64(-2), nil
		}
		p := f.hmget(k[1], "id", "stamp", "settings")
		if a[0] == "claim" {
			if p[0] != nil && p[0] != a[2] {
				return int64(-1), nil
			}
			f.hashes[k[1]] = map[string]string{"id": a[2], "stamp": strconv.FormatInt(f.nowUs(), 10), "settings": a[1], "quarantine": a[3]}
			f.exp[k[1]] = f.now().Add(time.Duration(atoi(a[4])) * time.Millisecond)
			return int64(1), nil
		}
		if p[0] != a[2] || p[2] != a[1] {
			return int64(-1), nil
		}
		if stamp, _ := p[1].(string); f.nowUs()-atoi(stamp) > atoi(a[2+1]) {
			return int64(-1), nil
		}
		f.setStr(k[0], a[1], 0)
		delete(f.hashes, k[1])
		delete(f.exp, k[1])
		return int64(1), nil
	case "ident":
		if _, ok := f.get(k[0]); !ok {
			f.setStr(k[0], a[0], 0)
		}
		v, _ := f.get(k[0])
		return v, nil
	case "state":
		str := func(v any) string { s, _ := v.(string); return s }
		m, _ := f.get(k[0])
		p := f.hmget(k[1], "settings", "stamp", "quarantine")
		out := []any{m, str(p[0]), str(p[1]), str(p[2]), strconv.FormatInt(f.nowUs(), 10)}
		if len(k) >= 4 {
			v, _ := f.get(k[2])
			fence, _ := f.get(k[3])
			out = append(out, v, f.pttl(k[2]), fence)
		}
		return out, nil
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
	if err == nil {
		_, _ = c.verify(context.Background()) // as New does
	}
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

// waiterPlace is the place a hand-off waiter id ('...~<place>+<ttl>')
// carries, as acquire.lua reads it.
func waiterPlace(v string) (int64, bool) {
	i := strings.LastIndexByte(v, '~')
	j := strings.LastIndexByte(v, '+')
	if i < 0 || j < i+2 || j == len(v)-1 {
		return 0, false
	}
	for _, r := range v[i+1:j] + v[j+1:] {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	p, err := strconv.ParseInt(v[i+1:j], 10, 64)
	return p, err == nil
}
