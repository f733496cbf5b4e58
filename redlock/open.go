package redlock

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/nodeconf"
)

// Config is what every client of one deployment shares: where its nodes
// are, how to log in, and the settings the nodes keep. Open builds a
// Client from it; ConfigFromEnv reads it from the QUORUMLOCK_* variables
// the quorumlock command reads, so that a program and the CLI configured
// alike are clients of the same deployment.
type Config struct {
	// Nodes are the deployment's Redis primaries, each a distinct
	// server: host:port, redis://[user[:password]@]host:port[/db],
	// rediss://... (TLS) or unix:///path.
	Nodes []string
	// Username and Password log in to every node whose entry names no
	// user of its own (an ACL user; Username "" is the default user).
	Username, Password string
	// TLS, when not nil, is used for every node, with each node's host as
	// the server name unless it sets one. Without it only rediss://
	// nodes use TLS, verified against the system's roots.
	TLS *tls.Config
	// MaxTTL and DriftFactor are WithMaxTTL and WithDriftFactor (zero:
	// their defaults). Every client of the deployment must use the same.
	MaxTTL      time.Duration
	DriftFactor float64
}

// ConfigFromEnv reads a Config from the environment, as the quorumlock
// command does: QUORUMLOCK_NODES (comma-separated), QUORUMLOCK_USERNAME,
// QUORUMLOCK_PASSWORD or QUORUMLOCK_PASSWORD_FILE (its first line),
// QUORUMLOCK_MAX_TTL (a Go duration), and QUORUMLOCK_TLS,
// QUORUMLOCK_TLS_CA, QUORUMLOCK_TLS_CERT, QUORUMLOCK_TLS_KEY,
// QUORUMLOCK_TLS_SERVER_NAME and QUORUMLOCK_TLS_INSECURE_SKIP_VERIFY
// (any of them turns TLS on for every node). It reads the files named
// but contacts no node; an error names the variable at fault and never
// shows a password.
func ConfigFromEnv() (Config, error) {
	var cfg Config
	cfg.Nodes = nodeconf.Split(os.Getenv(nodeconf.EnvNodes))
	if len(cfg.Nodes) == 0 {
		return Config{}, fmt.Errorf("redlock: ConfigFromEnv: %s is not set", nodeconf.EnvNodes)
	}
	cfg.Username = os.Getenv(nodeconf.EnvUsername)
	pw, err := nodeconf.Password(os.Getenv(nodeconf.EnvPassword), os.Getenv(nodeconf.EnvPasswordFile), nodeconf.EnvPassword, nodeconf.EnvPasswordFile)
	if err != nil {
		return Config{}, fmt.Errorf("redlock: ConfigFromEnv: %w", err)
	}
	cfg.Password = pw
	if v := os.Getenv(nodeconf.EnvMaxTTL); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("redlock: ConfigFromEnv: %s=%q: want a positive duration such as 30s", nodeconf.EnvMaxTTL, v)
		}
		cfg.MaxTTL = d
	}
	// As the CLI's flags read them (strconv.ParseBool): the same
	// variable must mean the same to both.
	on := func(name string) (bool, error) {
		v := os.Getenv(name)
		if v == "" {
			return false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("redlock: ConfigFromEnv: %s=%q: want true or false", name, v)
		}
		return b, nil
	}
	tlsOn, err := on(nodeconf.EnvTLS)
	if err != nil {
		return Config{}, err
	}
	insecure, err := on(nodeconf.EnvTLSInsecure)
	if err != nil {
		return Config{}, err
	}
	files := nodeconf.TLSFiles{CA: os.Getenv(nodeconf.EnvTLSCA), Cert: os.Getenv(nodeconf.EnvTLSCert), Key: os.Getenv(nodeconf.EnvTLSKey), Insecure: insecure,
		CAName: nodeconf.EnvTLSCA, CertName: nodeconf.EnvTLSCert, KeyName: nodeconf.EnvTLSKey}
	server := os.Getenv(nodeconf.EnvTLSServerName)
	if tlsOn || insecure || files.CA != "" || files.Cert != "" || files.Key != "" || server != "" {
		tc, err := files.Config()
		if err != nil {
			return Config{}, fmt.Errorf("redlock: ConfigFromEnv: %w", err)
		}
		tc.ServerName = server
		cfg.TLS = tc
	}
	return cfg, nil
}

// Open builds a Client for cfg's deployment, and bootstraps the
// deployment if nobody has used it yet, so that the first lock does not
// wait a quarantine (the trap of a new deployment's first TryLock: it
// starts a quarantine of about max ttl + 1 s, after which Bootstrap
// refuses, the deployment being in use).
//
// It builds one go-redis client per node with ContextTimeoutEnabled, so
// that a call's deadline bounds the socket wait on a frozen node, and
// Close closes them: release the leases first (see Close). cfg's MaxTTL
// and DriftFactor come before opts, which
// may add any other Option. New's rules apply: nodes that do not answer
// are tolerated, two entries for one server are refused.
//
// Then it calls Bootstrap with ctx, which is safe at every start
// (docs/protocol.md, "Bootstrap"): on a new deployment it admits every
// node; on one in use, or where a node does not answer, it admits
// nothing, and Open logs why at Info or Warn (WithLogger) and returns the
// Client, whose locks then wait as New's would. Only a node that keeps
// other settings than cfg's makes Open fail, with a *ConfigError
// (ErrConfigMismatch), since no lock of this Client could succeed there.
func Open(ctx context.Context, cfg Config, opts ...Option) (*Client, error) {
	ns := nodeconf.Nodes{Entries: cfg.Nodes, Username: cfg.Username, Password: cfg.Password, TLS: cfg.TLS, NodesName: "Config.Nodes"}
	ro, err := ns.Options()
	if err != nil {
		return nil, fmt.Errorf("redlock: Open: %w", err)
	}
	var all []Option
	if cfg.MaxTTL != 0 {
		all = append(all, WithMaxTTL(cfg.MaxTTL))
	}
	if cfg.DriftFactor != 0 {
		all = append(all, WithDriftFactor(cfg.DriftFactor))
	}
	all = append(all, opts...)
	owned := make([]*redis.Client, len(ro))
	nodes := make([]redis.UniversalClient, len(ro))
	for i, o := range ro {
		owned[i] = redis.NewClient(o)
		nodes[i] = owned[i]
	}
	c, err := New(nodes, all...)
	if err != nil {
		for _, rc := range owned {
			_ = rc.Close()
		}
		return nil, err
	}
	c.owned = owned
	var notNew *NotNewError
	switch err := c.Bootstrap(ctx); {
	case err == nil:
	case errors.As(err, &notNew):
		c.cfg.logger.Info("redlock: Open: the deployment is in use; Bootstrap admitted nothing", "err", err)
	case errors.Is(err, ErrConfigMismatch):
		c.Close()
		return nil, fmt.Errorf("redlock: Open: %w", err)
	default:
		c.cfg.logger.Warn("redlock: Open: Bootstrap admitted nothing; a new deployment is usable one quarantine after its first use", "err", err)
	}
	return c, nil
}
