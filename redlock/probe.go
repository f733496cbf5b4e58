package redlock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/quorum"
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
// logs. Clients whose address we cannot read are named by their position.
func addrOf(uc redis.UniversalClient, i int) string {
	if rc, ok := uc.(*redis.Client); ok {
		if a := rc.Options().Addr; a != "" {
			return rc.Options().Network + "://" + normalizeAddr(a)
		}
	}
	return fmt.Sprintf("node-%d", i)
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

// probe checks, on the nodes that answer within the probe timeout, that
// each is a primary of a Redis the scripts run on, and verifies their
// identities: two entries that reach the same server are refused with a
// *DuplicateNodeError.
func (c *Client) probe() (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.probe)
	defer cancel()
	type probed struct{ info, ident string }
	r := quorum.Start(nil, ctx, len(c.nodes), func(ctx context.Context, i int) (probed, error) {
		uc := c.nodes[i].uc
		info, err := uc.Info(ctx).Result()
		if err != nil {
			return probed{}, err
		}
		// The server's identity in the same round (see identity.go); a node
		// that cannot run it is verified later, when it first answers.
		ident, _ := c.nodes[i].sn.Ident(ctx, newValue())
		return probed{info, ident}, nil
	})
	replies := r.Await(ctx, len(c.nodes), func(quorum.Reply[probed]) bool { return true })
	r.Cancel()
	c.spawn(func() { r.Wait() }) // default go-redis clients ignore ctx: let stragglers finish on their own
	idents := make([]string, len(c.nodes))
	defer func() {
		if err == nil {
			_, err = c.prove(idents)
		}
	}()
	for _, rep := range replies {
		if rep.Err != nil {
			c.cfg.logger.Warn("redlock: node did not answer the startup probe", "node", rep.Node, "addr", c.nodes[rep.Node].name, "err", rep.Err)
			continue
		}
		idents[rep.Node] = rep.Val.ident
		nd := c.nodes[rep.Node]
		if err := checkInfo(rep.Val.info); err != nil {
			return fmt.Errorf("redlock: New: node %d (%s): %w", rep.Node, nd.name, err)
		}
		if n := infoField(rep.Val.info, "connected_slaves"); n != "" && n != "0" {
			c.cfg.logger.Warn("redlock: node has replicas; a failover to one of them can forget granted locks while keeping the node admitted",
				"node", rep.Node, "addr", nd.name, "replicas", n)
		}
	}
	return nil
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
