package servers_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestEtcdClusterLifecycle: three members come up with a leader; a killed
// member stops answering and rejoins on its old address after Restart;
// Stop ends every member and removes the directory it made.
func TestEtcdClusterLifecycle(t *testing.T) {
	t.Parallel()
	testenv.RequireBinaries(t, "etcd")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := servers.StartEtcdCluster(ctx, servers.EtcdConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	ms := c.Members()
	require.Len(t, ms, 3)
	require.Len(t, c.Endpoints(), 3)
	for _, m := range ms {
		require.NotZero(t, m.PID())
		conn, err := net.DialTimeout("tcp", m.Addr(), time.Second)
		require.NoError(t, err, "member %s", m.Name())
		_ = conn.Close()
	}
	m := ms[1]
	addr := m.Addr()
	require.NoError(t, m.Kill())
	require.Zero(t, m.PID())
	_, err = net.DialTimeout("tcp", addr, time.Second)
	require.Error(t, err, "a killed member still accepts connections")
	require.NoError(t, m.Restart(ctx))
	require.Equal(t, addr, m.Addr())
	require.NotZero(t, m.PID())

	require.NoError(t, c.Stop())
	require.NoError(t, c.Stop(), "Stop is idempotent")
	for _, m := range ms {
		require.Zero(t, m.PID())
	}
	require.Error(t, m.Restart(ctx), "a stopped member cannot restart")
}

func TestEtcdClusterBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []servers.EtcdConfig{{Members: -1}, {Members: 10}, {HeartbeatMs: 100, ElectionMs: 200}} {
		_, err := servers.StartEtcdCluster(context.Background(), cfg)
		require.Error(t, err, "%+v", cfg)
	}
}
