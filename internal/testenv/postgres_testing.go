package testenv

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// PG is the PostgreSQL server shared by the tests of one test binary. Tests
// get their own database from NewDatabase; they must not stop or kill the
// server (start a PostgresProcess for that).
type PG struct {
	p postgresServer
}

var shared struct {
	mu   sync.Mutex
	pg   postgresServer
	err  error
	done bool // Shutdown was called
}

// Postgres returns the shared server, starting it on first use. It skips the
// test if PostgreSQL is not installed (fails it in CI) and fails it if the
// server does not come up. The server lives until Shutdown, which the
// package's TestMain must call (see the package doc). Safe for concurrent use.
func Postgres(t testing.TB) *PG {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.done {
		t.Fatal("testenv: Postgres called after Shutdown")
	}
	if shared.pg == nil && shared.err == nil {
		// A failed start is remembered: retrying initdb in every test would
		// only repeat the same error slowly.
		shared.pg, shared.err = startSharedPostgres(context.Background())
	}
	if shared.err != nil {
		missingBackend(t, shared.err)
	}
	return &PG{p: shared.pg}
}

// Shutdown stops the shared PostgreSQL server, if one was started, and removes
// its directory. Call it from TestMain after m.Run. It is idempotent.
func Shutdown() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.done = true
	if shared.pg == nil {
		return nil
	}
	err := shared.pg.Stop()
	shared.pg = nil
	return err
}

// DSN returns a connection URL for database db on the shared server.
func (p *PG) DSN(db string) string { return p.p.DSN(db) }

var dbSeq atomic.Uint64

// NewDatabase creates an empty database with a name unique to this call and
// returns its DSN; the database is dropped, with any sessions still open,
// when the test ends. It fails the test if the database cannot be created.
func (p *PG) NewDatabase(t testing.TB) string {
	t.Helper()
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.p.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.p.DropDatabase(ctx, name); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("testenv: %v", err)
		}
	})
	return p.p.DSN(name)
}

// databaseName keeps PostgreSQL's 63-byte identifier limit: a longer name
// would be truncated silently and two tests could collide.
func databaseName(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	base := b.String()
	suffix := "_" + strconv.FormatUint(dbSeq.Add(1), 10) + "_" + randomHex(4)
	if limit := 63 - len("qt_") - len(suffix); len(base) > limit {
		base = base[:limit]
	}
	return "qt_" + base + suffix
}
