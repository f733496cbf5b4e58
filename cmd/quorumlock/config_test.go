package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/nodeconf"
)

func TestRedactURL(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1:6379":                      "127.0.0.1:6379",
		"redis://h:1":                         "redis://h:1",
		"redis://user@h:1":                    "redis://user@h:1",
		"redis://user:pw@h:1/0":               "redis://user:xxxxx@h:1/0",
		"rediss://:p@ss:word@h:1":             "rediss://:xxxxx@h:1",
		"redis://u:pw@h:1/0?x=a@b":            "redis://u:xxxxx@h:1/0?x=a@b",
		"unix://u:secret@/var/run/redis.sock": "unix://u:xxxxx@/var/run/redis.sock",
		"redis://:pa/ss?w#rd@h:1":             "redis://:xxxxx@h:1",
	}
	for in, want := range cases {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// redact masks a credential where a text echoes one, and leaves the rest
// alone, however common the password: with the password "e" or "redis"
// the whole-message replacement it replaced printed "rxxxxxdlock" and
// "xxxxx://".
func TestRedact(t *testing.T) {
	cases := map[string]string{
		"redlock: node 0 (127.0.0.1:1) refused this client":       "redlock: node 0 (127.0.0.1:1) refused this client",
		"node 1 (redis://:e@127.0.0.1:2/x): not a valid node URL": "node 1 (redis://:xxxxx@127.0.0.1:2/x): not a valid node URL",
		"nodes redis://a:redis@h:1,rediss://b:redis@h:2 down":     "nodes redis://a:xxxxx@h:1,rediss://b:xxxxx@h:2 down",
		`cmd="psql postgres://app:s3cret@db:5432/app"`:            `cmd="psql postgres://app:xxxxx@db:5432/app"`,
		"host=db user=app password=s3cret dbname=app":             "host=db user=app password=xxxxx dbname=app",
		`host=db password='it\'s secret' sslmode=verify-full`:     "host=db password=xxxxx sslmode=verify-full",
		`env PGPASSWORD=x cmd --password="a b" --pass=c`:          "env PGPASSWORD=xxxxx cmd --password=xxxxx --pass=xxxxx",
		"the password was wrong":                                  "the password was wrong",
	}
	for in, want := range cases {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNodeOptions(t *testing.T) {
	t.Setenv(envPassword, "global-pw")
	c := nodeConfig{nodes: " 127.0.0.1:7001, redis://alice:own-pw@localhost:7002/3 ,rediss://h.example:7003", username: "bob"}
	opts, err := c.nodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 3 {
		t.Fatalf("%d nodes", len(opts))
	}
	if o := opts[0]; o.Addr != "127.0.0.1:7001" || o.Username != "bob" || o.Password != "global-pw" || o.TLSConfig != nil {
		t.Errorf("plain node: %s %s tls=%v", o.Addr, o.Username, o.TLSConfig != nil)
	}
	if o := opts[1]; o.Addr != "localhost:7002" || o.Username != "alice" || o.Password != "own-pw" || o.DB != 3 {
		t.Errorf("URL node: %s %s db %d", o.Addr, o.Username, o.DB)
	}
	if o := opts[2]; o.TLSConfig == nil || o.TLSConfig.ServerName != "h.example" {
		t.Errorf("rediss node: tls %+v", o.TLSConfig)
	}
	if got := nodeconf.AddrKey(opts[1]); got != "tcp://127.0.0.1:7002" {
		t.Errorf("addrKey = %q, want tcp://127.0.0.1:7002", got)
	}
}

func TestChildEnv(t *testing.T) {
	in := []string{"PATH=/bin", envFencingToken + "=7", envPassword + "=pw", "QUORUMLOCK_NODES=a:1"}
	got := childEnv(in, true, 42)
	want := []string{"PATH=/bin", "QUORUMLOCK_NODES=a:1", envFencingToken + "=42"}
	if !slices.Equal(got, want) {
		t.Errorf("with fence: %q, want %q", got, want)
	}
	if got := childEnv(in, false, 0); slices.ContainsFunc(got, func(kv string) bool { return strings.HasPrefix(kv, envFencingToken) }) {
		t.Errorf("without fence, a token is passed: %q", got)
	}
	if in[1] != envFencingToken+"=7" {
		t.Error("childEnv modified its input")
	}
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}

	c := nodeConfig{nodes: "127.0.0.1:7001,db.internal:7002", tlsCA: certFile, tlsCert: certFile, tlsKey: keyFile}
	opts, err := c.nodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range opts {
		tc := o.TLSConfig
		if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify {
			t.Fatalf("node %d: TLS config %+v", i, tc)
		}
	}
	if opts[0].TLSConfig.ServerName != "127.0.0.1" || opts[1].TLSConfig.ServerName != "db.internal" {
		t.Errorf("server names %q, %q", opts[0].TLSConfig.ServerName, opts[1].TLSConfig.ServerName)
	}
	if opts[0].TLSConfig == opts[1].TLSConfig {
		t.Error("nodes share one tls.Config: a server name would leak between them")
	}

	c = nodeConfig{nodes: "127.0.0.1:7001", tlsServer: "redis.internal", tlsInsecure: true}
	opts, err = c.nodeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if tc := opts[0].TLSConfig; tc == nil || tc.ServerName != "redis.internal" || !tc.InsecureSkipVerify {
		t.Errorf("server name / insecure not applied: %+v", tc)
	}

	c = nodeConfig{nodes: "127.0.0.1:7001", tlsCA: keyFile}
	if _, err := c.nodeOptions(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a key file as CA: %v", err)
	}
}
