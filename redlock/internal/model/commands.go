package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// errUnimplemented is raised by a command (or option) the model does not
// implement: the exploration stops, so that a script that starts to use
// one cannot pass unchecked.
type errUnimplemented struct{ what string }

func (e errUnimplemented) Error() string {
	return "model: redis.call " + e.what + " is not implemented; implement it in redlock/internal/model/commands.go"
}

// status is a Redis status reply ("OK").
type status string

// exec runs one redis.call on ks at now (ms on the node's clock) and
// returns the reply as Redis would: int64, string, status, nil (a nil
// bulk) or []any. It implements the subset the scripts use (listed in
// Commands) with their Redis semantics, and panics with errUnimplemented
// on anything else.
func (ks keyspace) exec(now int64, cmd string, args []string) any {
	name := strings.ToUpper(cmd)
	need := func(n int) {
		if len(args) < n {
			panic(fmt.Errorf("model: %s with %d arguments", name, len(args)))
		}
	}
	str := func(key string) *entry {
		e := ks.live(key, now)
		if e != nil && e.kind != 's' {
			panic(fmt.Errorf("model: %s on %s, which is not a string (WRONGTYPE)", name, key))
		}
		return e
	}
	typed := func(key string, kind byte) *entry {
		e := ks.live(key, now)
		if e != nil && e.kind != kind {
			panic(fmt.Errorf("model: %s on %s of the wrong type (WRONGTYPE)", name, key))
		}
		return e
	}
	switch name {
	case "TIME":
		return []any{strconv.FormatInt(now/1000, 10), strconv.FormatInt(now%1000*1000, 10)}
	case "GET":
		need(1)
		if e := str(args[0]); e != nil {
			return e.str
		}
		return nil
	case "MGET":
		out := make([]any, len(args))
		for i, k := range args {
			if e := ks.live(k, now); e != nil && e.kind == 's' {
				out[i] = e.str
			}
		}
		return out
	case "SET":
		need(2)
		var nx bool
		var px int64
		for i := 2; i < len(args); i++ {
			switch strings.ToUpper(args[i]) {
			case "NX":
				nx = true
			case "PX":
				i++
				need(i + 1)
				px = integer(name, args[i])
				if px <= 0 {
					panic(fmt.Errorf("model: SET with PX %d (invalid expire time)", px))
				}
			default:
				panic(errUnimplemented{"SET option " + args[i]})
			}
		}
		if nx && ks.live(args[0], now) != nil {
			return nil
		}
		e := &entry{kind: 's', str: args[1]}
		if px > 0 {
			e.exp = now + px
		}
		ks[args[0]] = e
		return status("OK")
	case "DEL":
		var n int64
		for _, k := range args {
			if ks.live(k, now) != nil {
				delete(ks, k)
				n++
			}
		}
		return n
	case "PTTL":
		need(1)
		e := ks.live(args[0], now)
		switch {
		case e == nil:
			return int64(-2)
		case e.exp == 0:
			return int64(-1)
		}
		return e.exp - now
	case "PEXPIRE":
		if len(args) != 2 {
			panic(errUnimplemented{"PEXPIRE with options"})
		}
		e := ks.live(args[0], now)
		if e == nil {
			return int64(0)
		}
		ms := integer(name, args[1])
		if ms <= 0 {
			delete(ks, args[0])
			return int64(1)
		}
		e.exp = now + ms
		return int64(1)
	case "HSET":
		need(3)
		if len(args)%2 != 1 {
			panic(fmt.Errorf("model: HSET with %d arguments", len(args)))
		}
		e := typed(args[0], 'h')
		if e == nil {
			e = &entry{kind: 'h', hash: map[string]string{}}
			ks[args[0]] = e
		}
		var n int64
		for i := 1; i < len(args); i += 2 {
			if _, ok := e.hash[args[i]]; !ok {
				n++
			}
			e.hash[args[i]] = args[i+1]
		}
		return n
	case "HGET":
		if len(args) != 2 {
			panic(fmt.Errorf("model: HGET with %d arguments", len(args)))
		}
		if e := typed(args[0], 'h'); e != nil {
			if v, ok := e.hash[args[1]]; ok {
				return v
			}
		}
		return nil
	case "HMGET":
		need(2)
		e := typed(args[0], 'h')
		out := make([]any, len(args)-1)
		for i, f := range args[1:] {
			if e != nil {
				if v, ok := e.hash[f]; ok {
					out[i] = v
				}
			}
		}
		return out
	case "ZADD":
		need(3)
		nx, rest := false, args[1:]
		for len(rest) > 0 {
			switch strings.ToUpper(rest[0]) {
			case "NX":
				nx, rest = true, rest[1:]
				continue
			case "XX", "GT", "LT", "CH", "INCR":
				panic(errUnimplemented{"ZADD option " + rest[0]})
			}
			break
		}
		if len(rest) == 0 || len(rest)%2 != 0 {
			panic(fmt.Errorf("model: ZADD with %d arguments", len(args)))
		}
		e := typed(args[0], 'z')
		if e == nil {
			e = &entry{kind: 'z', zset: map[string]float64{}}
			ks[args[0]] = e
		}
		var n int64
		for i := 0; i < len(rest); i += 2 {
			s := score(name, rest[i])
			if _, ok := e.zset[rest[i+1]]; ok {
				if !nx {
					e.zset[rest[i+1]] = s
				}
				continue
			}
			e.zset[rest[i+1]] = s
			n++
		}
		return n
	case "ZREM":
		need(2)
		e := typed(args[0], 'z')
		var n int64
		if e != nil {
			for _, m := range args[1:] {
				if _, ok := e.zset[m]; ok {
					delete(e.zset, m)
					n++
				}
			}
			if len(e.zset) == 0 {
				delete(ks, args[0])
			}
		}
		return n
	case "ZSCORE":
		need(2)
		if e := typed(args[0], 'z'); e != nil {
			if s, ok := e.zset[args[1]]; ok {
				return strconv.FormatFloat(s, 'g', 17, 64)
			}
		}
		return nil
	case "ZRANGE":
		if len(args) != 3 {
			panic(errUnimplemented{"ZRANGE with options"})
		}
		e := typed(args[0], 'z')
		if e == nil {
			return []any{}
		}
		ms := e.sorted()
		lo, hi := integer(name, args[1]), integer(name, args[2])
		n := int64(len(ms))
		if lo < 0 {
			lo += n
		}
		if hi < 0 {
			hi += n
		}
		lo, hi = max(lo, 0), min(hi, n-1)
		out := []any{}
		for i := lo; i <= hi; i++ {
			out = append(out, ms[i])
		}
		return out
	case "ZRANGEBYSCORE", "ZREMRANGEBYSCORE":
		if len(args) != 3 {
			panic(errUnimplemented{name + " with options"})
		}
		e := typed(args[0], 'z')
		out := []any{}
		if e == nil {
			if name == "ZREMRANGEBYSCORE" {
				return int64(0)
			}
			return out
		}
		lo, hi := score(name, args[1]), score(name, args[2])
		for _, m := range e.sorted() {
			if s := e.zset[m]; s >= lo && s <= hi {
				out = append(out, m)
			}
		}
		if name == "ZRANGEBYSCORE" {
			return out
		}
		for _, m := range out {
			delete(e.zset, m.(string))
		}
		if len(e.zset) == 0 {
			delete(ks, args[0])
		}
		return int64(len(out))
	case "PUBLISH":
		// Nobody subscribes in the model: a release that would hand the
		// key to a waiter only if someone listens hands it to nobody.
		need(2)
		return int64(0)
	}
	panic(errUnimplemented{name})
}

// Commands are the redis.call commands the model implements.
var Commands = []string{"DEL", "GET", "HGET", "HMGET", "HSET", "MGET", "PEXPIRE", "PTTL", "PUBLISH", "SET",
	"TIME", "ZADD", "ZRANGE", "ZRANGEBYSCORE", "ZREM", "ZREMRANGEBYSCORE", "ZSCORE"}

func integer(cmd, s string) int64 {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		panic(fmt.Errorf("model: %s: %q is not an integer", cmd, s))
	}
	return v
}

func score(cmd, s string) float64 {
	switch s {
	case "-inf":
		return math.Inf(-1)
	case "+inf", "inf":
		return math.Inf(1)
	}
	if strings.HasPrefix(s, "(") {
		panic(errUnimplemented{cmd + " with an exclusive bound"})
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(fmt.Errorf("model: %s: %q is not a float", cmd, s))
	}
	return v
}
