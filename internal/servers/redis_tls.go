package servers

import (
	"crypto/tls"
	"errors"
	"strconv"
)

// RedisTLS is how a node serves TLS. The files are PEM; redis-server
// reads them at start and on Restart.
type RedisTLS struct {
	CertFile string // the server's certificate (--tls-cert-file)
	KeyFile  string // its private key (--tls-key-file)
	// CAFile holds the CAs that sign client certificates
	// (--tls-ca-cert-file). redis-server wants one even when it does not
	// ask clients for a certificate.
	CAFile string
	// AuthClients makes the server require a client certificate signed by
	// CAFile (--tls-auth-clients yes); otherwise it asks for none (no).
	AuthClients bool
	// Probe is how StartRedisProcess and Restart connect to check that
	// the server is up. Default: TLS without verifying the server (the
	// check also compares the server's pid), and no client certificate,
	// so a server with AuthClients needs a Probe that carries one.
	Probe *tls.Config
}

func (t *RedisTLS) args(port int) ([]string, error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return nil, errors.New("servers: redis TLS needs CertFile, KeyFile and CAFile")
	}
	if t.AuthClients && (t.Probe == nil || len(t.Probe.Certificates) == 0 && t.Probe.GetClientCertificate == nil) {
		return nil, errors.New("servers: redis TLS with AuthClients needs a Probe with a client certificate")
	}
	auth := "no"
	if t.AuthClients {
		auth = "yes"
	}
	return []string{
		"--port", "0",
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", t.CertFile,
		"--tls-key-file", t.KeyFile,
		"--tls-ca-cert-file", t.CAFile,
		"--tls-auth-clients", auth,
	}, nil
}

// probe is the client side of the readiness check: nil for plain TCP.
func (t *RedisTLS) probe() *tls.Config {
	switch {
	case t == nil:
		return nil
	case t.Probe != nil:
		return t.Probe
	default:
		return &tls.Config{InsecureSkipVerify: true} // readiness only; the pid check names the server
	}
}
