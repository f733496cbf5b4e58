package model

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// interp runs the scripts, as the script package embeds them (patched in
// memory when a Config asks for it), over a node's key space. Not safe
// for concurrent use: one per explorer.
type interp struct {
	L      *lua.LState
	protos map[string]*lua.FunctionProto
	ran    map[string]bool // the scripts run so far (Result.Scripts)
	// the call in progress
	ks  keyspace
	now int64
}

// newInterp compiles every script of the script package, each patched
// by patches[name] if there is one. A patch that changes nothing is an
// error: the test that relies on it would check the unpatched script.
func newInterp(patches map[string]func(string) string) (*interp, error) {
	in := &interp{L: lua.NewState(lua.Options{SkipOpenLibs: true}), protos: map[string]*lua.FunctionProto{}, ran: map[string]bool{}}
	// The libraries Redis gives scripts: base, table, string, math.
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		in.L.Push(in.L.NewFunction(lib.open))
		in.L.Push(lua.LString(lib.name))
		in.L.Call(1, 0)
	}
	redis := in.L.NewTable()
	in.L.SetField(redis, "call", in.L.NewFunction(in.call))
	in.L.SetField(redis, "pcall", in.L.NewFunction(func(L *lua.LState) int {
		panic(errUnimplemented{"redis.pcall"})
	}))
	in.L.SetGlobal("redis", redis)
	srcs := script.Sources()
	for name := range patches {
		if _, ok := srcs[name]; !ok {
			return nil, fmt.Errorf("model: a patch for %q, which is no script", name)
		}
	}
	for name, src := range srcs {
		if p := patches[name]; p != nil {
			patched := p(src)
			if patched == src {
				return nil, fmt.Errorf("model: the patch for %s.lua changes nothing", name)
			}
			src = patched
		}
		chunk, err := parse.Parse(strings.NewReader(src), name+".lua")
		if err != nil {
			return nil, fmt.Errorf("model: %s.lua: %w", name, err)
		}
		proto, err := lua.Compile(chunk, name+".lua")
		if err != nil {
			return nil, fmt.Errorf("model: %s.lua: %w", name, err)
		}
		in.protos[name] = proto
	}
	return in, nil
}

// run executes req on ks at now (ms on the node's clock), atomically as
// Redis does, and returns the reply as go-redis would hand it to the
// script package's parsers. ks is changed in place.
func (in *interp) run(ks keyspace, now int64, req script.Request) any {
	proto := in.protos[req.Script]
	if proto == nil {
		panic(fmt.Errorf("model: no script %q", req.Script))
	}
	if !in.ran[req.Script] {
		in.ran[req.Script] = true
	}
	in.ks, in.now = ks, now
	defer func() { in.ks = nil }()
	L := in.L
	// Sized tables: NewTable's default 32-slot map, made for every call,
	// was a tenth of the explorer's time.
	keys, argv := L.CreateTable(len(req.Keys), 0), L.CreateTable(len(req.Args), 0)
	for _, k := range req.Keys {
		keys.Append(lua.LString(k))
	}
	for _, a := range req.Args {
		argv.Append(lua.LString(a))
	}
	L.SetGlobal("KEYS", keys)
	L.SetGlobal("ARGV", argv)
	L.Push(L.NewFunctionFromProto(proto))
	if err := L.PCall(0, 1, nil); err != nil {
		var ae *lua.ApiError
		if errors.As(err, &ae) {
			if u, ok := ae.Object.(*lua.LUserData); ok {
				if e, ok := u.Value.(error); ok {
					panic(e)
				}
			}
		}
		panic(fmt.Errorf("model: %s.lua failed: %w", req.Script, err))
	}
	ret := L.Get(-1)
	L.Pop(1)
	return fromLua(ret)
}

// call is redis.call: the arguments are converted to strings as Redis
// does (numbers in their shortest form), and the reply back to Lua values
// by Redis's rules.
func (in *interp) call(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("redis.call with no command")
	}
	args := make([]string, n)
	for i := 1; i <= n; i++ {
		v := L.Get(i)
		switch v.Type() {
		case lua.LTString, lua.LTNumber:
			args[i-1] = lua.LVAsString(v)
		default:
			L.RaiseError("redis.call: argument %d is a %s (Lua redis lib command arguments must be strings or integers)", i, v.Type())
		}
	}
	var reply any
	func() {
		defer func() {
			if r := recover(); r != nil {
				err, ok := r.(error)
				if !ok {
					err = fmt.Errorf("%v", r)
				}
				// carried through PCall to run, which panics with it
				ud := L.NewUserData()
				ud.Value = err
				L.Error(ud, 0)
			}
		}()
		reply = in.ks.exec(in.now, args[0], args[1:])
	}()
	L.Push(toLua(L, reply))
	return 1
}

// toLua converts a Redis reply to Lua: integers to numbers, bulk strings
// to strings, a nil bulk to false, arrays to tables, a status to {ok=...}.
func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case nil:
		return lua.LFalse
	case int64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(x))
		return t
	case []any:
		t := L.CreateTable(len(x), 0)
		for i, e := range x {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	}
	panic(fmt.Errorf("model: reply %v of type %T", v, v))
}

// fromLua converts a script's return value as Redis does: numbers to
// integers (truncated), strings to bulk strings, false and nil to a nil
// bulk, true to 1, a table to the array of its elements up to the first
// nil.
func fromLua(v lua.LValue) any {
	switch x := v.(type) {
	case *lua.LNilType:
		return nil
	case lua.LBool:
		if x {
			return int64(1)
		}
		return nil
	case lua.LNumber:
		return int64(x)
	case lua.LString:
		return string(x)
	case *lua.LTable:
		if s := x.RawGetString("ok"); s != lua.LNil {
			return lua.LVAsString(s)
		}
		if e := x.RawGetString("err"); e != lua.LNil {
			panic(fmt.Errorf("model: a script returned the error %s", lua.LVAsString(e)))
		}
		out := []any{}
		for i := 1; ; i++ {
			e := x.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			out = append(out, fromLua(e))
		}
		return out
	}
	panic(fmt.Errorf("model: a script returned a %s", v.Type()))
}

// scripts are the names of the scripts run so far, sorted.
func (in *interp) scripts() []string {
	out := make([]string, 0, len(in.ran))
	for name := range in.ran {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
