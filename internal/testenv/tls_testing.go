package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// PKI is a certificate authority made for one test: its key never leaves
// the test's memory, and its files live in the test's temporary directory.
// Certificates are generated in Go, so tests need no openssl.
type PKI struct {
	CAFile string // the CA certificate, PEM

	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	// probe is the client certificate of the nodes' readiness check
	// (WithTLS): RedisOptions get no testing.TB to issue one with.
	probe Cert
}

// Cert is a certificate issued by a PKI, as files (for redis-server and
// the CLI) and as a tls.Certificate (for go-redis).
type Cert struct {
	CertFile, KeyFile string
	TLS               tls.Certificate
}

// CertOption adjusts a certificate issued by PKI.Server or PKI.Client.
type CertOption func(*x509.Certificate)

// Expired makes a certificate whose validity ended an hour ago. Default:
// valid from an hour ago for a day.
func Expired() CertOption {
	return func(c *x509.Certificate) {
		c.NotBefore = time.Now().Add(-48 * time.Hour)
		c.NotAfter = time.Now().Add(-time.Hour)
	}
}

// ForNames makes a certificate for these DNS names and no IP address.
// Default for a server: 127.0.0.1 and localhost.
func ForNames(names ...string) CertOption {
	return func(c *x509.Certificate) { c.DNSNames, c.IPAddresses = names, nil }
}

var pkiSeq atomic.Uint64

// NewPKI makes a fresh CA. Two PKIs trust nothing of each other's.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "quorumlock test CA " + randomHex(4)},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testenv: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testenv: CA certificate: %v", err)
	}
	p := &PKI{dir: t.TempDir(), ca: ca, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.CAFile = p.write(t, "ca.pem", pemBlock("CERTIFICATE", der))
	p.probe = p.Client(t)
	return p
}

// Pool returns a pool that trusts this CA only.
func (p *PKI) Pool() *x509.CertPool { return p.pool }

// Server issues a server certificate, by default for 127.0.0.1 and
// localhost.
func (p *PKI) Server(t testing.TB, opts ...CertOption) Cert {
	t.Helper()
	return p.issue(t, "server", x509.ExtKeyUsageServerAuth, opts)
}

// Client issues a client certificate.
func (p *PKI) Client(t testing.TB, opts ...CertOption) Cert {
	t.Helper()
	return p.issue(t, "client", x509.ExtKeyUsageClientAuth, opts)
}

// ClientConfig is a TLS configuration that trusts this CA, verifies the
// server name, and presents cert when it is not nil.
func (p *PKI) ClientConfig(cert *Cert) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: p.pool, ServerName: "127.0.0.1"}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLS}
	}
	return cfg
}

func (p *PKI) issue(t testing.TB, role string, usage x509.ExtKeyUsage, opts []CertOption) Cert {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "quorumlock test " + role},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	for _, o := range opts {
		o(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.key)
	if err != nil {
		t.Fatalf("testenv: %s certificate: %v", role, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testenv: %s key: %v", role, err)
	}
	name := role + "-" + randomHex(4)
	c := Cert{
		CertFile: p.write(t, name+".pem", pemBlock("CERTIFICATE", der)),
		KeyFile:  p.write(t, name+"-key.pem", pemBlock("EC PRIVATE KEY", keyDER)),
	}
	c.TLS = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return c
}

func (p *PKI) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: key: %v", err)
	}
	return key
}

func serial() *big.Int { return big.NewInt(int64(pkiSeq.Add(1))<<20 | time.Now().UnixNano()&(1<<20-1)) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// WithTLS makes the nodes serve TLS only, with the certificate server
// issued by p, and, with authClients, require a client certificate issued
// by p (mTLS). The nodes' Addr is their TLS port. Default: plain TCP.
// TLS nodes run only as processes: with the docker backend the test is
// skipped.
func WithTLS(p *PKI, server Cert, authClients bool) RedisOption {
	return redisOptionFunc(func(c *servers.RedisConfig) {
		rt := &servers.RedisTLS{
			CertFile:    server.CertFile,
			KeyFile:     server.KeyFile,
			CAFile:      p.CAFile,
			AuthClients: authClients,
			Probe:       p.ClientConfig(nil),
		}
		if authClients {
			// The readiness probe needs a certificate of its own; the
			// server certificate's key usage does not allow client auth.
			rt.Probe.Certificates = []tls.Certificate{p.probe.TLS}
		}
		c.TLS = rt
	})
}

// PostgresTLS starts a PostgreSQL server of the test's own that also
// accepts TLS with the certificate server (issued for 127.0.0.1), stopped
// when the test ends. It skips or fails like Postgres; with the docker
// backend it skips. The server's DSN method gives plain connections:
// change its sslmode to verify-full and add sslrootcert to verify it.
func PostgresTLS(t testing.TB, server Cert) *servers.PostgresProcess {
	t.Helper()
	if useDocker(t) {
		t.Skip("testenv: TLS servers run only as processes, not with the docker backend")
	}
	p, err := servers.StartPostgresProcess(context.Background(), servers.PostgresConfig{
		TLS: &servers.PostgresTLS{CertFile: server.CertFile, KeyFile: server.KeyFile},
	})
	if err != nil {
		missingBackend(t, err)
		return nil
	}
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Errorf("testenv: stop postgres: %v", err)
		}
	})
	return p
}
