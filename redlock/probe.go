package redlock

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/driver"
)

// What New checks of the node clients it is given, before and after it
// contacts them: each must be one independent primary. The contact itself,
// New's probe, is Client.probe (node.go).

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
func addrOf(conn driver.Conn, i int) string {
	if a := strings.TrimSpace(conn.Addr()); a != "" {
		return a
	}
	return fmt.Sprintf("node-%d", i)
}

// sameAddr is the key under which New compares node addresses: localhost
// and 127.0.0.1 are one address.
func sameAddr(conn driver.Conn, i int) string {
	a := addrOf(conn, i)
	if strings.HasPrefix(a, "unix://") {
		return a
	}
	return normalizeAddr(a)
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
