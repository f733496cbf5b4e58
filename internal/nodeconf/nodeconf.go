// Package nodeconf reads how to reach a deployment's Redis nodes: the node
// entries (host:port or a redis://, rediss:// or unix:// URL), the
// credentials and the TLS files, into one set of go-redis options per
// node. The CLI (from its flags and QUORUMLOCK_* variables) and
// redlock.Open (from a redlock.Config) share it, so that one entry means
// the same to both. It contacts no node.
//
// No error contains an entry, which may carry a password: callers name an
// entry in a redacted form.
package nodeconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The QUORUMLOCK_* variables: the CLI reads them for its flags and
// redlock.ConfigFromEnv for a Config.
const (
	EnvNodes         = "QUORUMLOCK_NODES"
	EnvUsername      = "QUORUMLOCK_USERNAME"
	EnvPassword      = "QUORUMLOCK_PASSWORD"
	EnvPasswordFile  = "QUORUMLOCK_PASSWORD_FILE"
	EnvMaxTTL        = "QUORUMLOCK_MAX_TTL"
	EnvTLS           = "QUORUMLOCK_TLS"
	EnvTLSCA         = "QUORUMLOCK_TLS_CA"
	EnvTLSCert       = "QUORUMLOCK_TLS_CERT"
	EnvTLSKey        = "QUORUMLOCK_TLS_KEY"
	EnvTLSServerName = "QUORUMLOCK_TLS_SERVER_NAME"
	EnvTLSInsecure   = "QUORUMLOCK_TLS_INSECURE_SKIP_VERIFY"
)

// Split reads a comma-separated list of node entries, spaces and empty
// entries dropped.
func Split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Password is the nodes' password: given, or the first line of file. One
// of them at most; names says what each is called in an error.
func Password(given, file, givenName, fileName string) (string, error) {
	if file == "" {
		return given, nil
	}
	if given != "" {
		return "", fmt.Errorf("both %s and %s are set: give one", givenName, fileName)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("password file: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pw := strings.TrimSuffix(line, "\r")
	if pw == "" {
		return "", fmt.Errorf("password file %s: first line is empty", file)
	}
	return pw, nil
}

// TLSFiles are the TLS settings given as files, and what each is called
// in an error (a flag or an environment variable).
type TLSFiles struct {
	CA, Cert, Key string
	Insecure      bool
	// CAName and PairName name the CA file and the certificate and key
	// pair in errors.
	CAName, CertName, KeyName string
}

// Config is a TLS configuration from f: TLS 1.2 at least, the CA's pool
// (the system's without one), the client certificate if any.
func (f TLSFiles) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.Insecure}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f.CAName, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", f.CAName, f.CA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %v", f.CertName, f.KeyName, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case f.Cert != "" || f.Key != "":
		return nil, fmt.Errorf("%s and %s go together: give both or neither", f.CertName, f.KeyName)
	}
	return cfg, nil
}

// Nodes is what Options needs besides the entries.
type Nodes struct {
	Entries            []string
	Username, Password string // for every entry that names no user of its own
	// TLS, when not nil, is used for every entry (a copy each, its
	// ServerName the entry's host unless set); otherwise only rediss://
	// entries use TLS, with RedissTLS (TLS 1.2 and the system's roots
	// when nil).
	TLS, RedissTLS *tls.Config
	// NodesName names the entries in errors ("--nodes", or a variable).
	NodesName string
}

// Options returns one set of go-redis options per entry, in order, with
// ContextTimeoutEnabled, so that a call's deadline bounds the socket wait.
// Two entries for one address are an error.
func (n Nodes) Options() ([]*redis.Options, error) {
	if len(n.Entries) == 0 {
		return nil, fmt.Errorf("no nodes: %s is empty", n.NodesName)
	}
	opts := make([]*redis.Options, 0, len(n.Entries))
	seen := map[string]int{}
	for i, e := range n.Entries {
		o, useTLS, err := Parse(e)
		if err != nil {
			return nil, fmt.Errorf("node %d (%s): %v", i, Redact(e), err)
		}
		if o.Username == "" && o.Password == "" {
			o.Username, o.Password = n.Username, n.Password
		}
		base := n.TLS
		if base == nil && useTLS {
			base = n.RedissTLS
			if base == nil {
				base = &tls.Config{MinVersion: tls.VersionTLS12}
			}
		}
		if base != nil {
			o.TLSConfig = base.Clone()
			if host, _, err := net.SplitHostPort(o.Addr); err == nil && o.Network == "tcp" && o.TLSConfig.ServerName == "" {
				o.TLSConfig.ServerName = host
			}
		}
		o.ContextTimeoutEnabled = true
		name := AddrKey(o)
		if j, dup := seen[name]; dup {
			return nil, fmt.Errorf("nodes %d (%s) and %d (%s) are the same address: every node must be a distinct Redis server", j, opts[j].Addr, i, o.Addr)
		}
		seen[name] = i
		opts = append(opts, o)
	}
	return opts, nil
}

// Parse reads one node entry: host:port, or a redis://, rediss:// or
// unix:// URL, and whether it asks for TLS (rediss://). The error never
// contains the entry.
func Parse(e string) (o *redis.Options, useTLS bool, err error) {
	if strings.Contains(e, "://") {
		scheme, _, _ := strings.Cut(e, "://")
		switch scheme {
		case "redis", "rediss", "unix":
		default:
			return nil, false, fmt.Errorf("unknown scheme %q (want redis://, rediss:// or unix://)", scheme)
		}
		o, err = redis.ParseURL(e)
		if err != nil {
			// url.Parse quotes the whole URL, password included.
			return nil, false, errors.New("not a valid node URL (want redis://[user[:password]@]host:port[/db])")
		}
		if o.Network == "tcp" {
			if _, port, err := net.SplitHostPort(o.Addr); err != nil || port == "" {
				return nil, false, errors.New("not a valid host:port")
			}
		}
		return o, scheme == "rediss", nil
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil || host == "" {
		return nil, false, errors.New("want host:port or a redis:// URL")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return nil, false, fmt.Errorf("invalid port %q", port)
	}
	return &redis.Options{Network: "tcp", Addr: e}, false, nil
}

// AddrKey names the server an entry dials, so that two entries for the
// same address are refused before anything is contacted:
// "tcp://host:port" with localhost written as 127.0.0.1. (redlock.New
// refuses them too, and entries that reach one server by different
// addresses, once it can ask the servers.)
func AddrKey(o *redis.Options) string {
	network := o.Network
	if network == "" {
		network = "tcp"
	}
	a := strings.TrimSpace(o.Addr)
	if rest, ok := strings.CutPrefix(a, "localhost:"); ok {
		a = "127.0.0.1:" + rest
	}
	return network + "://" + a
}
