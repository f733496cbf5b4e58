package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestStartNodesGivesSeparateEmptyServers: each node is its own server
// (distinct address and pid), starts empty, and is gone after StopAll.
func TestStartNodesGivesSeparateEmptyServers(t *testing.T) {
	testenv.RequireBinaries(t, "redis-server")
	ctx := context.Background()
	ns, err := startNodes(ctx, "redis-server", 3)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = servers.StopAll(ns)
		}
	})
	if len(ns) != 3 {
		t.Fatalf("%d nodes, want 3", len(ns))
	}
	addrs, pids := map[string]bool{}, map[int]bool{}
	for _, n := range ns {
		addrs[n.Addr()], pids[n.PID()] = true, true
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		size, err := c.DBSize(ctx).Result()
		_ = c.Close()
		if err != nil || size != 0 {
			t.Errorf("node %s: dbsize %d, err %v; want an empty, answering server", n.Addr(), size, err)
		}
	}
	if len(addrs) != 3 || len(pids) != 3 {
		t.Errorf("addresses %v, pids %v: want three distinct servers", addrs, pids)
	}
	if err := servers.StopAll(ns); err != nil {
		t.Fatal(err)
	}
	stopped = true
	for _, n := range ns {
		if n.PID() != 0 {
			t.Errorf("node %s still has pid %d after StopAll", n.Addr(), n.PID())
		}
	}
}

func TestStartNodesNamesTheFlagWhenRedisIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "redis-server")
	ns, err := startNodes(context.Background(), missing, 2)
	if err == nil {
		_ = servers.StopAll(ns)
		t.Fatal("started nodes from a binary that does not exist")
	}
	if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "--redis-server") {
		t.Errorf("error %q: want the path and a hint at --redis-server", err)
	}
}
