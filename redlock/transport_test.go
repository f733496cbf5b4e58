package redlock

import (
	"runtime"
	"testing"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// The record of a node's transport errors is one per go-redis client,
// however many Clients are built over it (a service may build one per
// request over shared node clients): the dial hook goes on the go-redis
// client once, and the record is dropped when the client is collected.
func TestTransport_OneRecordPerRedisClientDroppedWithIt(t *testing.T) {
	cl := newCluster(t, 3)
	nodes := cl.universal()
	first, err := New(nodes, WithProbeTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	for range 3 {
		c, err := New(nodes, WithProbeTimeout(time.Second))
		require.NoError(t, err)
		for i := range nodes {
			require.Same(t, first.nodes[i].net, c.nodes[i].net, "node %d: a second record (and dial hook) for the same go-redis client", i)
		}
		require.NoError(t, c.Close())
	}

	// A go-redis client nobody refers to any more takes its record with it.
	k := func() weak.Pointer[redis.Client] {
		rc := redis.NewClient(&redis.Options{Addr: cl.nodes[0].Addr()})
		require.NotNil(t, transportOf(rc))
		_ = rc.Close()
		return weak.Make(rc)
	}()
	_, ok := transports.Load(k)
	require.True(t, ok, "no record for the client")
	require.Eventually(t, func() bool {
		runtime.GC()
		_, ok := transports.Load(k)
		return !ok
	}, 5*time.Second, 10*time.Millisecond, "the record outlived its go-redis client")
}
