package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/flagdoc"
	"github.com/quorumlock/quorumlock/internal/nodeconf"
)

// nodeConfig is how to reach the Redis nodes: flags, each backed by a
// QUORUMLOCK_* environment variable, which the flag overrides.
//
// There is deliberately no --password flag: a command line is readable by
// every user of the machine (ps, /proc). Passwords come from the
// environment, a file, or a node URL (which can itself come from the
// environment). They are never printed: messages name nodes by host:port,
// and every text printed passes through redact (redact.go).
type nodeConfig struct {
	nodes        string
	username     string
	passwordFile string
	tls          bool
	tlsCA        string
	tlsCert      string
	tlsKey       string
	tlsServer    string
	tlsInsecure  bool

	password string // from QUORUMLOCK_PASSWORD or passwordFile
}

// Environment variables read for the node flags.
const (
	envNodes        = nodeconf.EnvNodes
	envUsername     = nodeconf.EnvUsername
	envPassword     = nodeconf.EnvPassword
	envPasswordFile = nodeconf.EnvPasswordFile
	envTLS          = nodeconf.EnvTLS
	envTLSCA        = nodeconf.EnvTLSCA
	envTLSCert      = nodeconf.EnvTLSCert
	envTLSKey       = nodeconf.EnvTLSKey
	envTLSServer    = nodeconf.EnvTLSServerName
	envTLSInsecure  = nodeconf.EnvTLSInsecure
	envMaxTTL       = nodeconf.EnvMaxTTL
)

// flagEnv maps a flag name to the environment variable that supplies it
// when the flag is not given. Subcommands add their own entries.
type flagEnv map[string]string

func (c *nodeConfig) register(fs *flag.FlagSet, env flagEnv) {
	fs.StringVar(&c.nodes, "nodes", "", "comma-separated Redis `nodes`: host:port, redis://[user[:password]@]host:port[/db], rediss://... or unix:///path")
	fs.StringVar(&c.username, "username", "", "ACL user `name` for every node (a node URL's own user wins)")
	fs.StringVar(&c.passwordFile, "password-file", "", "read the nodes' password from this `file` (first line); see also "+envPassword)
	fs.BoolVar(&c.tls, "tls", false, "connect with TLS (implied by rediss:// nodes and by any other --tls-* flag)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM `file` of the CA certificates that sign the nodes' certificates (default: the system pool)")
	fs.StringVar(&c.tlsCert, "tls-cert", "", "PEM client certificate `file`, for nodes that require one (with --tls-key)")
	fs.StringVar(&c.tlsKey, "tls-key", "", "PEM private key `file` of --tls-cert")
	fs.StringVar(&c.tlsServer, "tls-server-name", "", "`name` to verify in the nodes' certificates (default: each node's host)")
	fs.BoolVar(&c.tlsInsecure, "tls-insecure-skip-verify", false, "do not verify the nodes' certificates (testing only: anyone on the path can impersonate a node)")
	env["nodes"] = envNodes
	env["username"] = envUsername
	env["password-file"] = envPasswordFile
	env["tls"] = envTLS
	env["tls-ca"] = envTLSCA
	env["tls-cert"] = envTLSCert
	env["tls-key"] = envTLSKey
	env["tls-server-name"] = envTLSServer
	env["tls-insecure-skip-verify"] = envTLSInsecure
}

// applyEnv sets every flag of fs that was not given on the command line
// from its environment variable, when that is set and not empty.
func applyEnv(fs *flag.FlagSet, env flagEnv) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		name, ok := env[f.Name]
		if !ok || given[f.Name] {
			return
		}
		v, ok := os.LookupEnv(name)
		if !ok || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", name, err))
		}
	})
	return errors.Join(errs...)
}

// nodeOptions validates the node configuration and returns one set of
// go-redis options per node, in order (nodeconf, which redlock.Open
// shares). It reads the password and TLS files but contacts no node.
// Every error is a usage error.
func (c *nodeConfig) nodeOptions() ([]*redis.Options, error) {
	entries := nodeconf.Split(c.nodes)
	if len(entries) == 0 {
		return nil, fmt.Errorf("no nodes: give --nodes host:port,host:port,... or set %s", envNodes)
	}
	pw, err := nodeconf.Password(os.Getenv(envPassword), c.passwordFile, envPassword, "--password-file (or "+envPasswordFile+")")
	if err != nil {
		return nil, err
	}
	c.password = pw
	n := nodeconf.Nodes{Entries: entries, Username: c.username, Password: c.password, NodesName: "--nodes"}
	anyTLS := c.tls || c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" || c.tlsServer != "" || c.tlsInsecure
	if anyTLS || strings.Contains(c.nodes, "rediss://") {
		files := nodeconf.TLSFiles{CA: c.tlsCA, Cert: c.tlsCert, Key: c.tlsKey, Insecure: c.tlsInsecure,
			CAName: "--tls-ca", CertName: "--tls-cert", KeyName: "--tls-key"}
		base, err := files.Config()
		if err != nil {
			return nil, err
		}
		base.ServerName = c.tlsServer
		if anyTLS {
			n.TLS = base
		} else {
			n.RedissTLS = base
		}
	}
	return n.Options()
}

// clients builds one go-redis client per node. Deadlines of the caller's
// ctx bound socket reads and writes (ContextTimeoutEnabled), so a frozen
// node cannot hold a call longer than the round it belongs to.
func clients(opts []*redis.Options, tune func(*redis.Options)) []*redis.Client {
	out := make([]*redis.Client, len(opts))
	for i, o := range opts {
		o.ContextTimeoutEnabled = true
		if tune != nil {
			tune(o)
		}
		out[i] = redis.NewClient(o)
	}
	return out
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// warnEven warns on w that an even number of nodes buys nothing: n nodes
// tolerate as many failed nodes as n-1 do. The library logs the same
// through its logger, which the CLI shows only with -v.
func warnEven(w io.Writer, cmd string, n int) {
	if n%2 == 0 {
		fmt.Fprintf(w, "quorumlock %s: warning: %d nodes tolerate %d failed node(s), as %d would: use an odd number of nodes\n", cmd, n, n-(n/2+1), n-1)
	}
}

// redisLogger sends go-redis's own log lines to slog (or nowhere), so they
// do not interleave with the command's output on stderr.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// newLogger returns a debug logger on w, or a silent one. Its records,
// the library's included, pass through redact.
func newLogger(w io.Writer, verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(redactHandler{slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: redactAttr})})
}

// startupWarnings is the logger of a run without --verbose: until done is
// called, it writes each Warn or Error record (New's startup probe: a node
// that refuses the credentials, does not answer, evicts keys) as one line
// on w, "quorumlock CMD: warning: what; node=0 addr=... err=...", redacted;
// after that, nothing.
func startupWarnings(w io.Writer, cmd string) (*slog.Logger, func()) {
	h := &warnHandler{w: w, cmd: cmd, active: &atomic.Bool{}, mu: &sync.Mutex{}}
	h.active.Store(true)
	return slog.New(h), func() { h.active.Store(false) }
}

// warnHandler is startupWarnings' handler; the handlers With makes share
// its writer, lock and switch.
type warnHandler struct {
	w      io.Writer
	cmd    string
	active *atomic.Bool
	mu     *sync.Mutex
	attrs  []slog.Attr
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.active.Load()
}

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	if !h.active.Load() {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "quorumlock %s: warning: %s", h.cmd, strings.TrimPrefix(r.Message, "redlock: "))
	sep := "; "
	add := func(a slog.Attr) bool {
		a = redactAttr(nil, a)
		fmt.Fprintf(&b, "%s%s=%s", sep, a.Key, a.Value.Resolve().String())
		sep = " "
		return true
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(add)
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, redact(b.String()))
	return err
}

func (h *warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], as...)
	return &n
}

func (h *warnHandler) WithGroup(string) slog.Handler { return h }

// redactHandler redacts a record's message; its attributes are redacted
// by redactAttr.
type redactHandler struct{ slog.Handler }

func (h redactHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Message = redact(r.Message)
	return h.Handler.Handle(ctx, r)
}

func (h redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return redactHandler{h.Handler.WithAttrs(as)}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{h.Handler.WithGroup(name)}
}

// redactAttr redacts the text of a string, error or other value.
func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(redact(v.String()))
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			a.Value = slog.StringValue(redact(err.Error()))
		} else if s, ok := v.Any().(fmt.Stringer); ok {
			a.Value = slog.StringValue(redact(s.String()))
		}
	}
	return a
}

// durationFlag is a duration flag that may be absent ("not given" differs
// from every value) and must not be negative.
type durationFlag struct {
	d   time.Duration
	set bool
}

func (f *durationFlag) String() string {
	if f == nil || !f.set {
		return ""
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (examples: 500ms, 30s, 5m)")
	}
	if d < 0 {
		return errors.New("must not be negative")
	}
	f.d, f.set = d, true
	return nil
}

// printFlags writes fs's flags in --name form, with the environment
// variable each one falls back to.
func printFlags(w io.Writer, fs *flag.FlagSet, env flagEnv) { flagdoc.Print(w, fs, env) }

// parseFlags parses the flags of command cmd from args, then the
// environment variables in env for the flags args did not set. On --help
// it prints usage to stdout; on a bad flag, variable or (unless positional)
// argument it prints the error to stderr. ok is false in those cases, and
// code is what the command exits with.
func parseFlags(fs *flag.FlagSet, args []string, env flagEnv, cmd string, usage func(io.Writer, *flag.FlagSet, flagEnv), positional bool, stdout, stderr io.Writer) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs, env)
			return exitOK, false
		}
		return usageError(stderr, cmd, err), false
	}
	if err := applyEnv(fs, env); err != nil {
		return usageError(stderr, cmd, err), false
	}
	if !positional && fs.NArg() > 0 {
		return usageError(stderr, cmd, fmt.Errorf("unexpected argument %q", fs.Arg(0))), false
	}
	return exitOK, true
}
