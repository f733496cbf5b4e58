package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/quorum"
)

// What New checks of the node clients it is given, before and after it
// contacts them: each must be one independent primary.

// errNotPrimary is the reason a node client is refused.
const errNotPrimary = "Redlock needs independent primaries, one *redis.Client per node"

// checkNodeClient refuses clients that cannot be one independent primary.
func checkNodeClient(uc redis.UniversalClient) error {
	if uc == nil {
		return errors.New("nil client")
	}
	if v := reflect.ValueOf(uc); v.Kind() == reflect.Pointer && v.IsNil() {
		return fmt.Errorf("nil %T", uc)
	}
	switch c := uc.(type) {
	case *redis.ClusterClient:
		return fmt.Errorf("a cluster client spreads keys over several servers (a lock key and its fence would be in different slots): %s", errNotPrimary)
	case *redis.Ring:
		return fmt.Errorf("a ring client spreads keys over several servers: %s", errNotPrimary)
	case *redis.Client:
		if c.Options().Addr == "FailoverClient" {
			return fmt.Errorf("a Sentinel failover client follows a primary with replicas, and a failover loses the locks the old primary granted: %s", errNotPrimary)
		}
	}
	return nil
}

// addrOf names a node by the address its client dials, for errors and
// logs: host:port as configured (the CLI's status spells it the same
// way), or unix:// and the socket's path. Clients whose address we cannot
// read are named by their position.
func addrOf(uc redis.UniversalClient, i int) string {
	if rc, ok := uc.(*redis.Client); ok {
		if a := strings.TrimSpace(rc.Options().Addr); a != "" {
			if rc.Options().Network == "unix" {
				return "unix://" + a
			}
			return a
		}
	}
	return fmt.Sprintf("node-%d", i)
}

// sameAddr is the key under which New compares node addresses: localhost
// and 127.0.0.1 are one address.
func sameAddr(uc redis.UniversalClient, i int) string {
	if rc, ok := uc.(*redis.Client); ok && rc.Options().Network != "unix" {
		return normalizeAddr(addrOf(uc, i))
	}
	return addrOf(uc, i)
}

func normalizeAddr(a string) string {
	a = strings.TrimSpace(a)
	if rest, ok := strings.CutPrefix(a, "localhost:"); ok {
		return "127.0.0.1:" + rest
	}
	return a
}

// minVersion is the oldest Redis the scripts run on: they write after
// reading TIME, which needs scripts replicated by their effects, the
// default from 5.0 on.
var minVersion = [2]int{5, 0}

// probeGrace is how long New's probe waits for the other nodes once a
// majority has answered: a healthy node answers within a round trip, and
// one that does not is checked when it first answers (identity.go), so a
// process started while a node is down does not pay the whole probe
// timeout.
const probeGrace = 50 * time.Millisecond

// probe checks, on the nodes that answer, that each is a primary of a
// Redis the scripts run on and accepts this client, and verifies their
// identities: two entries that reach the same server are refused with a
// *DuplicateNodeError. It waits for every node up to the probe timeout,
// but only probeGrace more once a majority has answered.
func (c *Client) probe() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.probe)
	defer cancel()
	type probed struct {
		info, ident string
		bad         error // from checkInfo: the node cannot be a Redlock node
	}
	n := len(c.nodes)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (probed, error) {
		uc := c.nodes[i].uc
		info, err := uc.Info(ctx).Result()
		c.observe(i, err)
		switch re := refusal(err); {
		case err == nil:
		case re != nil && strings.HasPrefix(re.Err.Error(), "NOPERM"):
			info = "" // ACLs often deny INFO: the scripts are what must be allowed
		case re != nil:
			return probed{}, re
		default:
			return probed{}, err
		}
		if err := checkInfo(info); err != nil {
			return probed{info: info, bad: err}, nil
		}
		// The server's identity in the same round (see identity.go); a node
		// that cannot run it is verified later, when it first answers.
		ident, err := c.nodes[i].sn.Ident(ctx, newValue())
		if re := refusal(err); re != nil {
			return probed{}, re
		}
		return probed{info: info, ident: ident}, nil
	})
	answered := func(rep quorum.Reply[probed]) bool { return rep.Err == nil || refusal(rep.Err) != nil }
	replies := r.Await(ctx, c.quorum, answered)
	if len(replies) < n {
		// A refusal makes New fail only when the refusals leave no
		// majority: once one is heard, hear the rest out (up to the
		// probe timeout) to tell.
		wait := ctx
		if !slices.ContainsFunc(replies, func(rep quorum.Reply[probed]) bool { return refusal(rep.Err) != nil }) {
			gctx, gcancel := context.WithTimeout(ctx, probeGrace)
			defer gcancel()
			wait = gctx
		}
		replies = append(replies, r.Await(wait, n-len(replies), answered)...)
	}
	r.Cancel()
	c.spawn(func() { r.Wait() }) // default go-redis clients ignore ctx: let stragglers finish on their own
	idents := make([]string, n)
	defer func() {
		if err == nil {
			_, err = c.prove(idents)
		}
	}()
	heard := 0
	var refused []nodeRefusal
	for _, rep := range replies {
		nd := c.nodes[rep.Node]
		if re := refusal(rep.Err); re != nil {
			refused = append(refused, nodeRefusal{rep.Node, re})
			continue
		}
		if rep.Err != nil {
			c.cfg.logger.Warn("redlock: node did not answer the startup probe", "node", rep.Node, "addr", nd.name, "err", c.cause(rep.Node, rep.Err))
			continue
		}
		if rep.Val.bad != nil {
			if c.cfg.refusalsOK {
				// A tool that reports on the deployment (check, status)
				// says what is wrong with the node instead of failing.
				c.cfg.logger.Warn("redlock: node cannot be a Redlock node; its calls fail", "node", rep.Node, "addr", nd.name, "err", rep.Val.bad)
				continue
			}
			return fmt.Errorf("redlock: New: node %d (%s): %w", rep.Node, nd.name, rep.Val.bad)
		}
		heard++
		idents[rep.Node] = rep.Val.ident
		if n := infoField(rep.Val.info, "connected_slaves"); n != "" && n != "0" {
			c.cfg.logger.Warn("redlock: node has replicas; a failover to one of them can forget granted locks while keeping the node admitted",
				"node", rep.Node, "addr", nd.name, "replicas", n)
		}
		if p := infoField(rep.Val.info, "maxmemory_policy"); p != "" && p != "noeviction" {
			c.cfg.logger.Warn("redlock: node evicts keys when full (maxmemory-policy "+p+"); an evicted key is a forgotten lock: set noeviction",
				"node", rep.Node, "addr", nd.name, "maxmemory_policy", p)
		}
	}
	for _, i := range missingOf(n, replies) {
		last := c.nodes[i].net.last()
		if re := refusal(last); re != nil {
			// A refused TLS handshake: go-redis retries a failed dial
			// with backoff before the call returns, which outlasts the
			// grace, but the dial hook has seen the refusal already.
			refused = append(refused, nodeRefusal{i, re})
			continue
		}
		// It missed the probe's deadline: until it answers, attempts do
		// not wait for it and releases wait for it no longer than the node
		// timeout (see node.missed).
		c.nodes[i].missed.Store(true)
		args := []any{"node", i, "addr", c.nodes[i].name}
		if last != nil {
			args = append(args, "err", last)
		}
		c.cfg.logger.Warn("redlock: node did not answer the startup probe in time; it is checked when it first answers", args...)
	}
	if len(refused) > 0 && !c.cfg.refusalsOK && n-len(refused) < c.quorum {
		// Too few nodes are left to grant a lock: a configuration error,
		// which waiting does not fix.
		slices.SortFunc(refused, func(a, b nodeRefusal) int { return a.node - b.node })
		first := refused[0]
		return fmt.Errorf("redlock: New: node %d (%s) %w; %d of %d nodes refuse this client, which leaves fewer than the %d a lock needs",
			first.node, c.nodes[first.node].name, first.err, len(refused), n, c.quorum)
	}
	for _, r := range refused {
		// A minority: the deployment grants without them, tolerating as
		// many node failures fewer, until the client or the node is fixed.
		c.cfg.logger.Warn("redlock: node refused this client; locks are granted without it, with one node failure fewer to spare until it is fixed",
			"node", r.node, "addr", c.nodes[r.node].name, "err", r.err)
	}
	if heard < c.quorum {
		// Not an error: a service may start before its nodes do, and Lock
		// reports the nodes' causes. But say it, once.
		c.cfg.logger.Warn("redlock: fewer than a majority of nodes answered the startup probe: no lock can be obtained until more answer",
			"answered", heard, "nodes", n, "needed", c.quorum)
	}
	return nil
}

// nodeRefusal is a node that refused this client at the startup probe.
type nodeRefusal struct {
	node int
	err  *RefusalError
}

// missingOf lists the nodes in [0, n) without a reply in replies.
func missingOf[T any](n int, replies []quorum.Reply[T]) []int {
	got := make([]bool, n)
	for _, r := range replies {
		got[r.Node] = true
	}
	var out []int
	for i, ok := range got {
		if !ok {
			out = append(out, i)
		}
	}
	return out
}

// checkInfo refuses a server that cannot be a Redlock node.
func checkInfo(info string) error {
	if mode := infoField(info, "redis_mode"); mode != "" && mode != "standalone" {
		return fmt.Errorf("runs in %s mode: %s", mode, errNotPrimary)
	}
	if role := infoField(info, "role"); role != "" && role != "master" {
		return fmt.Errorf("is a replica (role %s): %s", role, errNotPrimary)
	}
	if v := infoField(info, "redis_version"); v != "" {
		var major, minor int
		if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil &&
			(major < minVersion[0] || major == minVersion[0] && minor < minVersion[1]) {
			return fmt.Errorf("runs Redis %s; quorumlock's scripts need %d.%d or later (they write after reading TIME)", v, minVersion[0], minVersion[1])
		}
	}
	return nil
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
