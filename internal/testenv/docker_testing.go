package testenv

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// useDocker reports whether the test layer runs containers; an unknown
// QUORUMLOCK_TEST_BACKEND fails the test.
func useDocker(t testing.TB) bool {
	t.Helper()
	backend, err := SelectedBackend()
	if err != nil {
		t.Fatal(err)
	}
	return backend == BackendDocker
}

// dockerRedisNodes is RedisNodes on the docker backend. A missing engine or
// image fails the test even outside CI: whoever set
// QUORUMLOCK_TEST_BACKEND=docker asked for containers, and a skip would hide
// that none ran.
func dockerRedisNodes(t testing.TB, n int, opts ...RedisOption) []*RedisNode {
	t.Helper()
	cfgs := make([]RedisConfig, n)
	for i := range cfgs {
		for _, o := range opts {
			o.apply(&cfgs[i])
		}
	}
	nodes := make([]*RedisNode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := StartRedisContainer(context.Background(), cfgs[i])
			if err == nil {
				nodes[i] = &RedisNode{r}
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, node := range nodes {
		if node != nil {
			t.Cleanup(func() {
				if err := node.Stop(); err != nil {
					t.Errorf("testenv: stop redis container %s: %v", node.Addr(), err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return nodes
}
