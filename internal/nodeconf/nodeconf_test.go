package nodeconf

import (
	"crypto/tls"
	"strings"
	"testing"
)

func TestOptions(t *testing.T) {
	n := Nodes{Entries: []string{"127.0.0.1:7001", "rediss://u:pw@redis.a:7002/0", "unix:///run/r.sock"}, Username: "app", Password: "global", NodesName: "--nodes"}
	opts, err := n.Options()
	if err != nil {
		t.Fatal(err)
	}
	if o := opts[0]; o.Username != "app" || o.Password != "global" || o.TLSConfig != nil || !o.ContextTimeoutEnabled {
		t.Errorf("host:port entry: %+v", o)
	}
	if o := opts[1]; o.Username != "u" || o.Password != "pw" || o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.a" || o.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Errorf("rediss:// entry keeps its own user and gets TLS for its host: %+v", o)
	}
	if o := opts[2]; o.Network != "unix" || o.TLSConfig != nil {
		t.Errorf("unix entry: %+v", o)
	}

	n.TLS = &tls.Config{MinVersion: tls.VersionTLS13}
	opts, err = n.Options()
	if err != nil {
		t.Fatal(err)
	}
	if opts[0].TLSConfig == nil || opts[0].TLSConfig.ServerName != "127.0.0.1" || opts[0].TLSConfig == opts[1].TLSConfig {
		t.Errorf("with TLS every entry gets a copy with its own host: %+v %+v", opts[0].TLSConfig, opts[1].TLSConfig)
	}
	n.TLS.ServerName = "redis.internal"
	if opts, _ = n.Options(); opts[1].TLSConfig.ServerName != "redis.internal" {
		t.Errorf("a set server name is kept: %q", opts[1].TLSConfig.ServerName)
	}
}

func TestOptionsRefusesBadEntries(t *testing.T) {
	for _, tc := range []struct {
		entries []string
		want    string
	}{
		{nil, "no nodes: --nodes is empty"},
		{[]string{"127.0.0.1"}, "want host:port"},
		{[]string{"127.0.0.1:0"}, "invalid port"},
		{[]string{"ftp://h:1"}, "unknown scheme"},
		{[]string{"redis://:s3cret@h:1/x"}, "node 0 (redis://:xxxxx@h:1/x): not a valid node URL"},
		{[]string{"localhost:7001", "127.0.0.1:7001"}, "the same address"},
	} {
		_, err := Nodes{Entries: tc.entries, NodesName: "--nodes"}.Options()
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: %v, want %q", tc.entries, err, tc.want)
		}
	}
}
