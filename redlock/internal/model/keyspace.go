package model

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// entry is one key of a node's key space: a string, a hash or a sorted
// set, and when it expires on the node's clock (ms; 0: never).
type entry struct {
	str  string
	hash map[string]string
	zset map[string]float64
	kind byte // 's', 'h', 'z'
	exp  int64
}

func (e *entry) clone() *entry {
	c := *e
	if e.hash != nil {
		c.hash = make(map[string]string, len(e.hash))
		for k, v := range e.hash {
			c.hash[k] = v
		}
	}
	if e.zset != nil {
		c.zset = make(map[string]float64, len(e.zset))
		for k, v := range e.zset {
			c.zset[k] = v
		}
	}
	return &c
}

// keyspace is a node's data. States share key spaces; a node that runs a
// script works on a copy (see node.run).
type keyspace map[string]*entry

func (ks keyspace) clone() keyspace {
	c := make(keyspace, len(ks))
	for k, e := range ks {
		c[k] = e.clone()
	}
	return c
}

// live returns key's entry if it exists and has not expired at now (ms on
// the node's clock). Redis deletes an expired key when it is touched or
// by its sampler; either way no command sees it, which is what matters.
func (ks keyspace) live(key string, now int64) *entry {
	e := ks[key]
	if e == nil {
		return nil
	}
	if e.exp != 0 && now >= e.exp {
		delete(ks, key)
		return nil
	}
	return e
}

// encode writes the live keys in key order, but skip, with their
// expiries on the node's clock: the key space's part of a state's
// identity.
func (ks keyspace) encode(b *strings.Builder, now int64, skip string) {
	keys := make([]string, 0, len(ks))
	for k, e := range ks {
		if k != skip && (e.exp == 0 || now < e.exp) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := ks[k]
		fmt.Fprintf(b, "%s=", k)
		switch e.kind {
		case 's':
			b.WriteString(e.str)
		case 'h':
			b.WriteString(sortedPairs(e.hash))
		case 'z':
			zs := make(map[string]string, len(e.zset))
			for m, s := range e.zset {
				zs[m] = strconv.FormatFloat(s, 'g', -1, 64)
			}
			b.WriteString(sortedPairs(zs))
		}
		if e.exp != 0 {
			fmt.Fprintf(b, "@%d", e.exp)
		}
		b.WriteByte(';')
	}
}

func sortedPairs(m map[string]string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var b strings.Builder
	b.WriteByte('{')
	for _, k := range ks {
		fmt.Fprintf(&b, "%s:%s,", k, m[k])
	}
	b.WriteByte('}')
	return b.String()
}

// sorted returns a sorted set's members by score, then member, as Redis
// orders them.
func (e *entry) sorted() []string {
	ms := make([]string, 0, len(e.zset))
	for m := range e.zset {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		a, b := e.zset[ms[i]], e.zset[ms[j]]
		if a != b {
			return a < b
		}
		return ms[i] < ms[j]
	})
	return ms
}
