package chaos

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

//go:embed shim/clockshim.c
var clockShimSource []byte

// clockShim is the compiled LD_PRELOAD library that lets the suite move a
// Redis node's wall clock (see clockshim.c).
type clockShim struct {
	dir string
	lib string
}

// buildClockShim compiles clockshim.c with the machine's C compiler into a
// fresh directory under tmp.
//
// libfaketime would do if it could start redis-server; Debian 12's cannot
// (it aborts on a recursive clock_gettime during start-up), which is why the
// shim exists. FAKETIME_TIMESTAMP_FILE-style control is what the shim
// mimics, so switching back is a matter of the environment only.
func buildClockShim(ctx context.Context, tmp string) (*clockShim, error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			return nil, errors.New("chaos: the clock-jump fault needs a C compiler (cc or gcc) to build its clock shim; install gcc")
		}
	}
	dir, err := os.MkdirTemp(tmp, "quorumlock-clock-")
	if err != nil {
		return nil, fmt.Errorf("chaos: clock shim dir: %w", err)
	}
	// redis-server may run as another user than the one who built it.
	if err := os.Chmod(dir, 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	src := filepath.Join(dir, "clockshim.c")
	if err := os.WriteFile(src, clockShimSource, 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	lib := filepath.Join(dir, "clockshim.so")
	out, err := exec.CommandContext(ctx, cc, "-shared", "-fPIC", "-O2", "-o", lib, src).CombinedOutput()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("chaos: compile the clock shim with %s: %w\n%s", cc, err, strings.TrimSpace(string(out)))
	}
	return &clockShim{dir: dir, lib: lib}, nil
}

var offsetSeq int

// newOffsetFile creates a file holding a zero offset for one node.
func (s *clockShim) newOffsetFile() (string, error) {
	offsetSeq++
	path := filepath.Join(s.dir, "offset-"+strconv.Itoa(offsetSeq))
	return path, writeOffset(path, 0)
}

func (s *clockShim) env(offsetFile string) []string {
	return []string{"LD_PRELOAD=" + s.lib, "QUORUMLOCK_CLOCK_FILE=" + offsetFile}
}

func (s *clockShim) remove() error { return os.RemoveAll(s.dir) }

// writeOffset replaces the offset file atomically: the shim sees either the
// old or the new value, never half a number.
func writeOffset(path string, d time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(d), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("chaos: write clock offset: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("chaos: write clock offset: %w", err)
	}
	return nil
}

// CheckLocalBinaries reports a missing redis-server before anything starts.
// A missing PostgreSQL is reported by the first start (testenv knows where
// Debian keeps its binaries).
func CheckLocalBinaries() error {
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

func (l *lazyShim) get(ctx context.Context, dir string) (*clockShim, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.s != nil {
		return l.s, nil
	}
	s, err := buildClockShim(ctx, dir)
	if err != nil {
		return nil, err
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

// stopAll stops every node and joins their errors.
func stopAll[N interface{ Stop() error }](nodes []N) error {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, n.Stop())
	}
	return errors.Join(errs...)
}
