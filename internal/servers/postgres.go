package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresConfig describes one PostgreSQL server. The zero value is a server
// on a free port in a fresh temporary directory.
type PostgresConfig struct {
	// Port to listen on; 0 picks a free one (and retries on a clash).
	Port int
	// Dir receives the cluster (Dir/data) and the logs; empty means a
	// temporary directory that Stop removes. When running as root it must be
	// reachable by the postgres user, because the server runs as that user.
	Dir string
	// TLS, when set, makes the server accept TLS (ssl=on) with this
	// certificate, besides plain connections. Default: no TLS.
	TLS *PostgresTLS
}

// PostgresTLS is the server's certificate and key, PEM files. They are
// copied into Dir at every start, owned by the server's user and private,
// as PostgreSQL requires of its key.
type PostgresTLS struct {
	CertFile, KeyFile string
}

// PostgresProcess is a PostgreSQL server running as a child of this process,
// listening on 127.0.0.1 and on a unix socket in its data directory, with
// trust authentication for the superuser "postgres" and fsync off (test data
// is disposable; speed is not). Its methods are safe for concurrent use.
type PostgresProcess struct {
	binDir  string
	cfg     PostgresConfig
	ownsDir bool
	cred    *syscall.Credential // non-nil when running as root

	mu      sync.Mutex
	c       *child
	stopped bool
}

const (
	postgresStartTimeout = 90 * time.Second
	// postgresSuperuser is fixed so that DSNs do not depend on who runs the
	// tests.
	postgresSuperuser = "postgres"
	// unixSocketPathMax is sun_path's size on Linux less the terminating NUL.
	unixSocketPathMax = 107
)

// StartPostgresProcess runs initdb (unless Dir already holds a cluster) and
// then postgres, and returns once the server accepts connections. ctx bounds the start only (90s when it has no
// deadline). When the effective user is root, both run as the "postgres"
// system user, since they refuse to run as root. On failure nothing is left
// running and the error carries the end of the relevant log.
func StartPostgresProcess(ctx context.Context, cfg PostgresConfig) (*PostgresProcess, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("servers: invalid postgres port %d", cfg.Port)
	}
	binDir, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	p := &PostgresProcess{binDir: binDir, cfg: cfg}
	if os.Geteuid() == 0 {
		if p.cred, err = postgresCredential(); err != nil {
			return nil, err
		}
	}
	if p.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "quorumlock-pg-")
		if err != nil {
			return nil, fmt.Errorf("servers: postgres dir: %w", err)
		}
		p.cfg.Dir, p.ownsDir = d, true
	} else if err := os.MkdirAll(p.cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: postgres dir: %w", err)
	}
	if err := p.start(ctx, true); err != nil {
		if p.ownsDir {
			_ = os.RemoveAll(p.cfg.Dir)
		}
		return nil, err
	}
	return p, nil
}

func postgresCredential() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("servers: running as root, and initdb refuses root: need a postgres system user: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("servers: postgres user ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (p *PostgresProcess) dataDir() string { return filepath.Join(p.cfg.Dir, "data") }

// LogPath returns the file the server's output is appended to, across
// restarts.
func (p *PostgresProcess) LogPath() string { return filepath.Join(p.cfg.Dir, "postgres.log") }

// Dir returns the directory holding the cluster and the logs.
func (p *PostgresProcess) Dir() string { return p.cfg.Dir }

// start runs initdb when asked, then the server, retrying on a port clash
// when the port was chosen here.
func (p *PostgresProcess) start(ctx context.Context, initdb bool) error {
	ctx, cancel := withDefaultTimeout(ctx, postgresStartTimeout)
	defer cancel()
	if sock := filepath.Join(p.dataDir(), ".s.PGSQL.65535"); len(sock) > unixSocketPathMax {
		return fmt.Errorf("servers: postgres dir %q is too long for a unix socket path; use a shorter one", p.cfg.Dir)
	}
	if p.cred != nil {
		// Everything we create must belong to the server's user; the logs are
		// written through descriptors opened here, so they can stay root's.
		if err := os.Chown(p.cfg.Dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return fmt.Errorf("servers: chown postgres dir: %w", err)
		}
	}
	if _, err := os.Stat(filepath.Join(p.dataDir(), "PG_VERSION")); initdb && err != nil {
		if err := p.initdb(ctx); err != nil {
			return err
		}
	}
	if err := p.copyTLS(); err != nil {
		return err
	}
	autoPort := p.cfg.Port == 0
	for attempt := 1; ; attempt++ {
		if autoPort {
			port, err := freePort()
			if err != nil {
				return err
			}
			p.cfg.Port = port
		}
		c, clash, err := p.startServer(ctx)
		if err == nil {
			p.c = c
			return nil
		}
		if !clash || !autoPort || attempt == startAttempts {
			return err
		}
	}
}

func (p *PostgresProcess) initdb(ctx context.Context) error {
	logPath := filepath.Join(p.cfg.Dir, "initdb.log")
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("servers: initdb log: %w", err)
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(p.binDir, "initdb"),
		"--pgdata", p.dataDir(),
		"--username", postgresSuperuser,
		"--auth", "trust",
		"--encoding", "UTF8",
		"--locale", "C",
		"--no-sync",
		"--no-instructions",
	)
	cmd.Dir = p.cfg.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr(p.cred)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("servers: initdb: %w\n--- log %s ---\n%s", err, logPath, readTail(logPath, 0, 4096))
	}
	return nil
}

// tlsFiles are where the server reads its certificate and key.
func (p *PostgresProcess) tlsFiles() (cert, key string) {
	return filepath.Join(p.cfg.Dir, "server.crt"), filepath.Join(p.cfg.Dir, "server.key")
}

// copyTLS puts the configured certificate and key where the server reads
// them, readable by the server's user only.
func (p *PostgresProcess) copyTLS() error {
	if p.cfg.TLS == nil {
		return nil
	}
	cert, key := p.tlsFiles()
	for _, f := range [][2]string{{p.cfg.TLS.CertFile, cert}, {p.cfg.TLS.KeyFile, key}} {
		b, err := os.ReadFile(f[0])
		if err == nil {
			err = os.WriteFile(f[1], b, 0o600)
		}
		if err == nil && p.cred != nil {
			err = os.Chown(f[1], int(p.cred.Uid), int(p.cred.Gid))
		}
		if err != nil {
			return fmt.Errorf("servers: postgres TLS files: %w", err)
		}
	}
	return nil
}

func (p *PostgresProcess) startServer(ctx context.Context) (*child, bool, error) {
	var tlsArgs []string
	if p.cfg.TLS != nil {
		cert, key := p.tlsFiles()
		tlsArgs = []string{"-c", "ssl=on", "-c", "ssl_cert_file=" + cert, "-c", "ssl_key_file=" + key}
	}
	c, err := startChild(childSpec{
		path: filepath.Join(p.binDir, "postgres"),
		args: append([]string{
			"-D", p.dataDir(),
			"-c", "port=" + strconv.Itoa(p.cfg.Port),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "unix_socket_directories=" + p.dataDir(),
			// fsync=off only risks data on an OS crash; a killed server
			// keeps every commit, since the page cache survives. Never
			// synchronous_commit=off: a kill would lose acknowledged commits,
			// and the chaos suite would count them as lost updates.
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
			"-c", "shared_buffers=16MB",
			"-c", "max_connections=200",
			"-c", "logging_collector=off",
		}, tlsArgs...),
		env:     []string{"LC_ALL=C"},
		dir:     p.cfg.Dir,
		logPath: p.LogPath(),
		cred:    p.cred,
	})
	if err != nil {
		return nil, false, err
	}
	if err := p.waitReady(ctx, c); err != nil {
		_ = c.kill()
		return nil, portClash(c.logTail(4096)), c.startupError("postgres on "+p.Addr(), err)
	}
	return c, false, nil
}

func (p *PostgresProcess) waitReady(ctx context.Context, c *child) error {
	var last error
	for {
		if c.exited() {
			return errors.New("process exited")
		}
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attempt, p.DSN("postgres"))
		if err == nil {
			err = conn.Ping(attempt)
			_ = conn.Close(attempt)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last connect: %v)", ctx.Err(), last)
		case <-c.done:
			return errors.New("process exited")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Addr returns "127.0.0.1:PORT"; it stays the same across restarts.
func (p *PostgresProcess) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.cfg.Port))
}

// DSN returns a connection URL for database db as the superuser over TCP.
func (p *PostgresProcess) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(postgresSuperuser),
		Host:     p.Addr(),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// PID returns the postmaster's pid, or 0 after Stop.
func (p *PostgresProcess) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return 0
	}
	return p.c.pid()
}

// CreateDatabase creates database name. It fails if it exists.
func (p *PostgresProcess) CreateDatabase(ctx context.Context, name string) error {
	return p.exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops database name if it exists, ending its open sessions
// first, so a test that leaked a pool cannot block the cleanup.
func (p *PostgresProcess) DropDatabase(ctx context.Context, name string) error {
	return p.exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (p *PostgresProcess) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, p.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("servers: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("servers: %s: %w", sql, err)
	}
	return nil
}

// Kill ends the server and all its backends with SIGKILL, a crash, and waits
// until they are gone. Killing a server that already exited is not an error;
// Restart brings it back.
func (p *PostgresProcess) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.c == nil {
		return errors.New("servers: postgres process was stopped")
	}
	return p.c.kill()
}

// Restart starts the server again on the same port and data directory,
// killing it first if it still runs; the data survives (crash recovery runs
// after a kill). It returns once the server accepts connections.
func (p *PostgresProcess) Restart(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return errors.New("servers: postgres process was stopped")
	}
	if err := p.c.kill(); err != nil {
		return err
	}
	return p.start(ctx, false)
}

// Stop shuts the server down for good and removes the directory if
// StartPostgresProcess created it. It uses SIGINT (fast shutdown): SIGTERM
// would wait for every client to disconnect, and a leaked pool would hang it.
// It escalates to SIGKILL after 30s, is idempotent and succeeds if the server
// already died.
func (p *PostgresProcess) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.stopped = true
	err := p.c.stop(syscall.SIGINT, 30*time.Second)
	p.c = nil
	if p.ownsDir {
		err = errors.Join(err, os.RemoveAll(p.cfg.Dir))
	}
	return err
}
