package redlock

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/nodeconf"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

func (cl *cluster) config() Config {
	var cfg Config
	for _, nd := range cl.nodes {
		cfg.Nodes = append(cfg.Nodes, nd.Addr())
	}
	return cfg
}

// open is Open over cl, closed when t ends, with the harness's node
// timeout (as cluster.build gives New) and its identity proofs settled.
func (cl *cluster) open(t *testing.T, cfg Config, opts ...Option) *Client {
	t.Helper()
	c, err := Open(context.Background(), cfg, withTestNodeTimeout(opts)...)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	settleProofs(t, c)
	return c
}

// A program written as the examples are (Open, then a lock) on a
// deployment nobody used gets its lock at once. The same program with New
// meets the first-use trap: its first try starts every node's quarantine,
// and Bootstrap then refuses.
func TestOpen_ANewDeploymentLocksAtOnce(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	cfg := cl.config()
	cfg.MaxTTL = 2 * time.Second
	c := cl.open(t, cfg)
	l, err := c.TryLock(ctx, testenv.Key(t), time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))
	for i := range 5 {
		require.True(t, cl.admittedOn(t, i), "node %d not admitted", i)
	}

	trap := newCluster(t, 5)
	n := trap.client(t, WithMaxTTL(2*time.Second))
	_, err = n.TryLock(ctx, testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrNodeQuarantined, "New's first try on a new deployment")
	require.ErrorIs(t, n.Bootstrap(ctx), ErrNotNew)
}

// Every start of a program calls Open: on a deployment in use it admits
// nothing more and returns a working Client.
func TestOpen_ADeploymentInUseIsNoError(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 5)
	cfg := cl.config()
	first := cl.open(t, cfg)
	l, err := first.TryLock(ctx, testenv.Key(t), 5*time.Second)
	require.NoError(t, err)
	second := cl.open(t, cfg)
	_, err = second.TryLock(ctx, l.Key(), time.Second)
	require.True(t, IsHeld(err), "the key is held by the first program: %v", err)
	require.NoError(t, l.Release(ctx))
	l2, err := second.TryLock(ctx, l.Key(), time.Second)
	require.NoError(t, err)
	require.NoError(t, l2.Release(ctx))
}

// Nodes that keep other settings make Open fail with ErrConfigMismatch:
// no lock of that Client could succeed. Nothing is written.
func TestOpen_OtherSettingsAreAConfigError(t *testing.T) {
	cl := newCluster(t, 3)
	cfg := cl.config()
	cfg.MaxTTL = 2 * time.Second
	cl.open(t, cfg)
	cfg.MaxTTL = 3 * time.Second
	_, err := Open(context.Background(), cfg, withTestNodeTimeout(nil)...)
	require.ErrorIs(t, err, ErrConfigMismatch)
	for i := range 3 {
		require.Equal(t, settingsString(3, 2*time.Second, 0.01), cl.value(t, i, keyMarker), "node %d", i)
	}
}

// A minority of nodes down: Open returns a Client (Bootstrap admits
// nothing while a node does not answer), and it locks once the quarantine
// is over, as one from New would.
func TestOpen_ANodeDownIsNoError(t *testing.T) {
	cl := newCluster(t, 3)
	cfg := cl.config()
	ln, err := net.Listen("tcp", "127.0.0.1:0") // an address nothing listens on
	require.NoError(t, err)
	cfg.Nodes[2] = ln.Addr().String()
	require.NoError(t, ln.Close())
	c := cl.open(t, cfg)
	_, err = c.TryLock(context.Background(), testenv.Key(t), time.Second)
	require.ErrorIs(t, err, ErrNodeQuarantined)
}

// Bad input is refused before any node is contacted, and the error
// never shows a password.
func TestOpen_RefusesBadNodeLists(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		nodes []string
		want  string
	}{
		{"none", nil, "no nodes"},
		{"a bad port", []string{"127.0.0.1:99999"}, "invalid port"},
		{"a bad scheme", []string{"http://127.0.0.1:1"}, "unknown scheme"},
		{"one address twice", []string{"127.0.0.1:7001", "localhost:7001", "127.0.0.1:7003"}, "same address"},
		{"a password in a bad URL", []string{"redis://:s3cret@127.0.0.1:1/x"}, "not a valid node URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(ctx, Config{Nodes: tc.nodes})
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "s3cret")
		})
	}
	_, err := Open(ctx, Config{Nodes: []string{"127.0.0.1:7001"}, MaxTTL: -time.Second})
	require.ErrorContains(t, err, "WithMaxTTL")
}

// Close closes the node clients Open built (and only those: New's stay
// the caller's).
func TestOpen_CloseClosesTheNodeClientsItBuilt(t *testing.T) {
	cl := newCluster(t, 3)
	c, err := Open(context.Background(), cl.config(), withTestNodeTimeout(nil)...)
	require.NoError(t, err)
	owned := c.owned
	require.Len(t, owned, 3)
	require.NoError(t, c.Close())
	for i, rc := range owned {
		require.ErrorContains(t, rc.Ping(context.Background()).Err(), "closed", "node client %d", i)
	}
}

func TestConfigFromEnv(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	require.NoError(t, os.WriteFile(pwFile, []byte("from-file\nsecond line\n"), 0o600))
	for _, name := range []string{nodeconf.EnvNodes, nodeconf.EnvUsername, nodeconf.EnvPassword, nodeconf.EnvPasswordFile, nodeconf.EnvMaxTTL, nodeconf.EnvTLS, nodeconf.EnvTLSCA, nodeconf.EnvTLSCert, nodeconf.EnvTLSKey, nodeconf.EnvTLSServerName, nodeconf.EnvTLSInsecure} {
		t.Setenv(name, "")
	}

	_, err := ConfigFromEnv()
	require.ErrorContains(t, err, nodeconf.EnvNodes)

	t.Setenv(nodeconf.EnvNodes, " 127.0.0.1:7001, redis://u:pw@127.0.0.1:7002/0 ,,127.0.0.1:7003")
	t.Setenv(nodeconf.EnvUsername, "app")
	t.Setenv(nodeconf.EnvPasswordFile, pwFile)
	t.Setenv(nodeconf.EnvMaxTTL, "45s")
	cfg, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:7001", "redis://u:pw@127.0.0.1:7002/0", "127.0.0.1:7003"}, cfg.Nodes)
	require.Equal(t, "app", cfg.Username)
	require.Equal(t, "from-file", cfg.Password)
	require.Equal(t, 45*time.Second, cfg.MaxTTL)
	require.Nil(t, cfg.TLS)

	t.Setenv(nodeconf.EnvPassword, "too")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, "give one")
	t.Setenv(nodeconf.EnvPassword, "")

	t.Setenv(nodeconf.EnvMaxTTL, "45")
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, nodeconf.EnvMaxTTL)
	t.Setenv(nodeconf.EnvMaxTTL, "")

	// What the CLI's --tls flag refuses, ConfigFromEnv refuses too.
	for _, v := range []string{"maybe", "yes"} {
		t.Setenv(nodeconf.EnvTLS, v)
		_, err = ConfigFromEnv()
		require.ErrorContains(t, err, nodeconf.EnvTLS, v)
	}
	t.Setenv(nodeconf.EnvTLS, "TRUE")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS)
	t.Setenv(nodeconf.EnvTLS, "")

	t.Setenv(nodeconf.EnvTLSServerName, "redis.internal")
	cfg, err = ConfigFromEnv()
	require.NoError(t, err)
	require.NotNil(t, cfg.TLS, "any TLS variable turns TLS on")
	require.Equal(t, "redis.internal", cfg.TLS.ServerName)

	t.Setenv(nodeconf.EnvTLSCA, pwFile)
	_, err = ConfigFromEnv()
	require.ErrorContains(t, err, nodeconf.EnvTLSCA)
	require.False(t, strings.Contains(err.Error(), "from-file"), "the password file's content in an error: %v", err)
}

// A Client from Open owns its node clients, so a lease must be released
// before Close: after it, Release cannot reach the nodes and says so
// (the keys then free at their ttl), where a Client from New could still
// release through its caller's clients.
func TestOpen_AReleaseAfterCloseIsUnconfirmed(t *testing.T) {
	ctx := context.Background()
	cl := newCluster(t, 3)
	c, err := Open(ctx, cl.config(), withTestNodeTimeout(nil)...)
	require.NoError(t, err)
	settleProofs(t, c)
	l, err := c.TryLock(ctx, testenv.Key(t), 2*time.Second)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	err = l.Release(ctx)
	require.ErrorIs(t, err, ErrReleaseUnconfirmed)
	require.ErrorContains(t, err, "client is closed")
	for i := range 3 {
		require.NotEmpty(t, cl.value(t, i, l.Key()), "node %d: the key is still there until its ttl", i)
	}
}
