// Package contract holds the node-side scripts' contract: typed cases,
// each a script call as a Client builds it, run on a real redis-server
// with its setup and its check of the reply and of the keys and messages
// it leaves. Run runs them through any driver, so that every driver is
// held to the same contract (package script's tests run them on go-redis,
// drivertest on each adapter). It imports testing: tests only.
package contract

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Run runs every contract case on the server conn reaches, each as a
// subtest after a FLUSHALL. The server must be one the test owns.
func Run(t *testing.T, conn driver.Conn) {
	t.Helper()
	require.NotEmpty(t, contractCases)
	for _, tc := range append(contractCases, metadataCases...) {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conn.Do(context.Background(), "flushall")
			require.NoError(t, err)
			runContract(t, contractNode{c: conn}, tc)
		})
	}
}

// Uncovered lists the scripts that no case calls: a new script cannot
// skip the contract.
func Uncovered() []string {
	covered := map[string]bool{}
	for _, tc := range append(contractCases, metadataCases...) {
		s, _, _ := tc.call(0)
		covered[s.Name()] = true
	}
	var out []string
	for _, name := range script.Names() {
		if !covered[name] {
			out = append(out, name)
		}
	}
	return out
}

func runContract(t *testing.T, n contractNode, tc contractCase) {
	s, _, _ := tc.call(0)
	if identReplies(s) || s.Name() == "release" {
		n.put(t, script.IdentKey, ctServer, 0) // a case may take it away
	}
	if tc.admitted {
		admitted(t, n)
	}
	if tc.held.value != "" {
		n.put(t, ctKey, tc.held.value, tc.held.ttl)
	}
	if len(tc.line) > 0 {
		now := n.nowUs(t)
		for _, w := range tc.line {
			n.zadd(t, script.QueueKey(ctKey), w.id, now-w.ago)
			if w.seen {
				n.zadd(t, script.SeenKey(ctKey), w.id, now-w.seenAgo)
			}
		}
	}
	if tc.setup != nil {
		tc.setup(t, n)
	}
	var heard func() []string
	if tc.published != nil {
		heard = n.listen(t, script.ReleaseChannel(ctKey))
	}
	told := map[string]func() []string{}
	for c := range tc.told {
		told[c] = n.listen(t, script.WakeChannel(c))
	}
	var now int64
	if tc.fromNow {
		now = n.nowUs(t)
	}
	_, keys, args := tc.call(now)
	server, _ := n.read(t, script.IdentKey)
	res, err := s.Run(context.Background(), n.c, keys, args...)
	if err == nil && res == nil {
		// go-redis's Script.Run, which the cases were written against,
		// answers a nil reply (a script's false) with redis.Nil.
		err = errNil
	}
	if err == nil && identReplies(s) {
		res = withoutIdent(t, res, server, s.Name() == "commit")
	}
	tc.check(t, n, res, err)
	for c, want := range tc.told {
		if got := told[c](); len(want) == 0 {
			require.Empty(t, got, "told Client %s", c)
		} else {
			require.Equal(t, want, got, "told Client %s", c)
		}
	}
	if heard != nil {
		got := heard()
		require.Equal(t, len(tc.published), len(got), "published on the release channel: %q", got)
		if len(got) > 0 {
			require.Equal(t, tc.published, got, "published on the release channel")
		}
	}
}

// errNil stands for a nil reply in a case's check.
var errNil = fmt.Errorf("nil reply")

// call is the script call of tc, its KEYS and its ARGV; now is the
// node's clock in µs, for a Place fromNow.
func (tc contractCase) call(now int64) (*script.Script, []string, []any) {
	args := tc.args
	if tc.fromNow {
		switch a := args.(type) {
		case script.AcquireArgs:
			a.Place += now
			args = a
		case script.ReleaseArgs:
			a.Place += now
			args = a
		default:
			panic(fmt.Sprintf("case %q: fromNow with %T, which has no place", tc.name, tc.args))
		}
	}
	return script.Call(args, ctSettings)
}

// runCall runs the call of args on n, outside a case's own call.
func runCall(n contractNode, args any) (any, error) {
	s, keys, argv := script.Call(args, ctSettings)
	return s.Run(context.Background(), n.c, keys, argv...)
}

// identReplies reports whether every reply of s ends with the identity of
// the server that ran it ("" for none), whatever else it says: the
// client counts the reply only from the server its entry was proven to
// reach (SameServer). runContract checks it for every case and hands the
// case the reply without it: for the commit script, whose reply is
// {committed, identity}, the bare 0 or 1.
func identReplies(s *script.Script) bool {
	switch s.Name() {
	case "acquire", "extend", "commit":
		return true
	}
	return false
}

func withoutIdent(t *testing.T, res any, server string, scalar bool) any {
	t.Helper()
	s, ok := res.([]any)
	require.True(t, ok, "reply %#v is not an array", res)
	require.NotEmpty(t, s)
	require.Equal(t, server, s[len(s)-1], "the reply %#v does not end with the server's identity", res)
	if scalar {
		require.Len(t, s, 2)
		return s[0]
	}
	return s[:len(s)-1]
}
