package servers

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresContainerConfig describes one PostgreSQL container.
type PostgresContainerConfig struct {
	// Port to publish on 127.0.0.1; 0 picks a free one (and retries on a
	// clash).
	Port int
}

// PostgresContainer is a PostgreSQL server in a Docker container, published
// on a fixed port of 127.0.0.1, with the same settings as PostgresProcess:
// trust authentication for the superuser "postgres", fsync off. Its methods
// are safe for concurrent use.
type PostgresContainer struct {
	c *container
}

// StartPostgresContainer starts a PostgreSQL container from the image chosen
// by QUORUMLOCK_POSTGRES_IMAGE (default: quorumlock/postgres:15 if `make
// images` built it, else postgres:15) and returns once it accepts
// connections over TCP. ctx bounds the start only (90s when it has no
// deadline). Errors wrap ErrDockerUnavailable when no engine answers or the
// image is missing.
func StartPostgresContainer(ctx context.Context, cfg PostgresContainerConfig) (*PostgresContainer, error) {
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, errInvalidPort("postgres", cfg.Port)
	}
	if err := dockerReady(); err != nil {
		return nil, err
	}
	image, err := resolveImage(PostgresImageEnv, postgresImages)
	if err != nil {
		return nil, err
	}
	c, err := runContainer(ctx, containerSpec{
		what:  "postgres",
		image: image,
		// See PostgresProcess.startServer for why fsync may be off and
		// synchronous_commit may not.
		cmd: []string{
			"postgres",
			"-c", "fsync=off",
			"-c", "full_page_writes=off",
			"-c", "shared_buffers=16MB",
			"-c", "max_connections=200",
		},
		// The official image's contract, which the local image keeps.
		env: []string{
			"POSTGRES_USER=" + postgresSuperuser,
			"POSTGRES_HOST_AUTH_METHOD=trust",
			"POSTGRES_DB=postgres",
		},
		ctrPort:  "5432/tcp",
		hostPort: cfg.Port,
	})
	if err != nil {
		return nil, err
	}
	p := &PostgresContainer{c: c}
	ctx, cancel := withDefaultTimeout(ctx, postgresStartTimeout)
	defer cancel()
	if err := c.waitReady(ctx, p.ping); err != nil {
		_ = c.stop()
		return nil, err
	}
	return p, nil
}

// ping connects over TCP. The images initialise over a unix socket only, so
// a TCP connection means the final server is up.
func (p *PostgresContainer) ping(ctx context.Context) error {
	attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(attempt, p.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(attempt))
	return conn.Ping(attempt)
}

// Addr returns "127.0.0.1:PORT"; it stays the same across restarts.
func (p *PostgresContainer) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.c.port))
}

// DSN returns a connection URL for database db as the superuser over TCP.
func (p *PostgresContainer) DSN(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(postgresSuperuser),
		Host:     p.Addr(),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// ContainerID returns the Docker container's id.
func (p *PostgresContainer) ContainerID() string { return p.c.id }

// PID returns the host pid of the container's main process (the
// postmaster), or 0 when it is not running or was stopped.
func (p *PostgresContainer) PID() int { return p.c.pid() }

// CreateDatabase creates database name. It fails if it exists.
func (p *PostgresContainer) CreateDatabase(ctx context.Context, name string) error {
	return execPostgres(ctx, p.DSN("postgres"), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// DropDatabase drops database name if it exists, ending its sessions first.
func (p *PostgresContainer) DropDatabase(ctx context.Context, name string) error {
	return execPostgres(ctx, p.DSN("postgres"), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

// Pause freezes the container (docker pause).
func (p *PostgresContainer) Pause() error { return p.c.pause() }

// Resume undoes Pause.
func (p *PostgresContainer) Resume() error { return p.c.resume() }

// Kill ends the container with SIGKILL and waits until it stopped.
func (p *PostgresContainer) Kill() error { return p.c.kill() }

// Restart kills the container if it runs and starts it again on the same
// port; the data survives (crash recovery runs after a kill). It returns
// once the server accepts connections.
func (p *PostgresContainer) Restart(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, postgresStartTimeout)
	defer cancel()
	return p.c.restart(ctx, p.ping)
}

// Stop removes the container and its data for good. It is idempotent.
func (p *PostgresContainer) Stop() error { return p.c.stop() }

func execPostgres(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("servers: connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("servers: %s: %w", sql, err)
	}
	return nil
}

func errInvalidPort(what string, port int) error {
	return fmt.Errorf("servers: invalid %s port %d", what, port)
}
