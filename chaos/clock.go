package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// clockShim is what moves a Redis node's wall clock: libfaketime where it
// can run redis-server, otherwise the suite's own LD_PRELOAD library
// (internal/servers/shim/clockshim.c), compiled here. Both read the offset from a file the suite
// replaces atomically.
type clockShim struct {
	dir      string
	lib      string
	faketime bool   // lib is libfaketime
	why      string // why the own shim is used, when libfaketime was tried
}

// Tool names what moves the clock, for the run's notes.
func (s *clockShim) Tool() string {
	if s.faketime {
		return "libfaketime (" + s.lib + ")"
	}
	if s.why != "" {
		return "the suite's clock shim (libfaketime was tried: " + s.why + ")"
	}
	return "the suite's clock shim"
}

// buildClockShim compiles the shim (package servers) into dir. Debian
// 12's libfaketime (0.9.10) cannot start Debian's redis-server (it aborts
// on a recursive clock_gettime during start-up), which is why the shim
// exists.
func buildClockShim(ctx context.Context, dir string) (*clockShim, error) {
	lib, err := srv.BuildClockShim(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("chaos: the clock-jump fault needs libfaketime that can run redis-server, or the clock shim: %w", err)
	}
	return &clockShim{dir: dir, lib: lib}, nil
}

// libfaketimePaths are where distributions install libfaketime.
var libfaketimePaths = []string{
	"/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
	"/usr/lib64/faketime/libfaketime.so.1",
}

func findLibfaketime() string {
	if p := os.Getenv("QUORUMLOCK_LIBFAKETIME"); p != "" {
		return p
	}
	for _, p := range libfaketimePaths {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// probeLibfaketime starts a throw-away redis-server under libfaketime and
// checks that it answers and that its TIME moves when the offset file
// does. It returns the usable clock or why libfaketime will not do.
func probeLibfaketime(ctx context.Context, dir string) (*clockShim, error) {
	lib := findLibfaketime()
	if lib == "" {
		return nil, errors.New("not installed")
	}
	s := &clockShim{dir: dir, lib: lib, faketime: true}
	file := filepath.Join(dir, "probe-offset")
	if err := s.write(file, 0); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := l.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	_ = l.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.Env = append(os.Environ(), s.env(file)...)
	// exec copies the output in its own goroutine until Wait returns, while
	// complaint may read it before that: the buffer takes a lock.
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	complaint := func(what string) error {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "libfaketime") {
				return fmt.Errorf("%s: %s", what, strings.TrimSpace(line))
			}
		}
		return errors.New(what)
	}
	rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, PoolSize: 1})
	defer rc.Close()
	var before time.Time
	for {
		if before, err = rc.Time(ctx).Result(); err == nil {
			break
		}
		select {
		case <-exited:
			return nil, complaint("redis-server exited under it")
		case <-ctx.Done():
			return nil, complaint("redis-server did not answer under it")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := s.write(file, 10*time.Second); err != nil {
		return nil, err
	}
	after, err := rc.Time(ctx).Result()
	if err != nil || after.Sub(before) < 9*time.Second {
		return nil, complaint("it did not move redis-server's clock")
	}
	return s, nil
}

// lockedBuffer is a bytes.Buffer safe to write and read from two goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// offsetSeq numbers offset files; nodes start in parallel.
var offsetSeq atomic.Int64

// newOffsetFile creates a file holding a zero offset for one node.
func (s *clockShim) newOffsetFile() (string, error) {
	path := filepath.Join(s.dir, "offset-"+strconv.FormatInt(offsetSeq.Add(1), 10))
	return path, s.write(path, 0)
}

func (s *clockShim) env(offsetFile string) []string {
	if s.faketime {
		// Monotonic clocks stay real, as an NTP step leaves them; Redis's
		// event loop runs on them.
		return []string{"LD_PRELOAD=" + s.lib, "FAKETIME_TIMESTAMP_FILE=" + offsetFile,
			"FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"}
	}
	return srv.ClockShimEnv(s.lib, offsetFile)
}

func (s *clockShim) remove() error { return os.RemoveAll(s.dir) }

// write replaces the offset file atomically: the clock sees either the old
// or the new value, never half a number. libfaketime takes seconds with a
// sign ("+3.400000"), the shim nanoseconds.
func (s *clockShim) write(path string, d time.Duration) error {
	v := strconv.FormatInt(int64(d), 10)
	if s.faketime {
		v = fmt.Sprintf("%+.6f", d.Seconds())
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(v+"\n"), 0o644); err != nil {
		return fmt.Errorf("chaos: write clock offset: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("chaos: write clock offset: %w", err)
	}
	return nil
}

// checkLocalBinaries reports a missing redis-server before anything starts.
// A missing PostgreSQL is reported by the first start (package servers
// knows where Debian keeps its binaries).
func checkLocalBinaries() error {
	var missing []string
	if _, err := exec.LookPath("redis-server"); err != nil {
		missing = append(missing, "redis-server (Debian: apt-get install redis-server)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("chaos: the local backend needs programs that are not installed: %s", strings.Join(missing, "; "))
	}
	return nil
}

// lazyShim builds the clock shim on first use, once per backend, and
// removes it when the backend closes.
type lazyShim struct {
	mu sync.Mutex
	s  *clockShim
}

// get returns the clock, made on first use in a fresh directory under
// tmp: libfaketime when tryFaketime and it can run redis-server here,
// the compiled shim otherwise.
func (l *lazyShim) get(ctx context.Context, tmp string, tryFaketime bool) (*clockShim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	dir, err := os.MkdirTemp(tmp, "quorumlock-clock-")
	if err != nil {
		return nil, fmt.Errorf("chaos: clock dir: %w", err)
	}
	// redis-server may run as another user than the one who made it.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	var s *clockShim
	var why error
	if tryFaketime {
		s, why = probeLibfaketime(ctx, dir)
	}
	if s == nil {
		if s, err = buildClockShim(ctx, dir); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		if why != nil {
			s.why = why.Error()
		}
	}
	l.s = s
	return s, nil
}

func (l *lazyShim) remove() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s == nil {
		return nil
	}
	err := l.s.remove()
	l.s = nil
	return err
}
