package chaos

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestChaosLibfaketimeOffset checks the libfaketime environment and offset
// format the suite writes on a program libfaketime can run (date), and
// that a file change is seen without a restart.
func TestChaosLibfaketimeOffset(t *testing.T) {
	lib := findLibfaketime()
	if lib == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("libfaketime is not installed (CI installs the faketime package)")
		}
		t.Skip("libfaketime is not installed")
	}
	s := &clockShim{dir: t.TempDir(), lib: lib, faketime: true}
	file := filepath.Join(s.dir, "offset")
	date := func() float64 {
		t.Helper()
		cmd := exec.Command("date", "+%s.%N")
		cmd.Env = append(os.Environ(), s.env(file)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v - float64(time.Now().UnixNano())/1e9
	}
	for _, d := range []time.Duration{0, 3400 * time.Millisecond, 100 * time.Second} {
		if err := s.write(file, d); err != nil {
			t.Fatal(err)
		}
		if got := date(); got < d.Seconds()-0.5 || got > d.Seconds()+0.5 {
			t.Errorf("offset %v: date runs %.3fs ahead", d, got)
		}
	}
}

// TestChaosClockChoice: the local backend's clock is libfaketime only if a
// redis-server under it answers and its TIME moves; otherwise the compiled
// shim, with libfaketime's complaint kept for the notes. Either way the
// node's clock moves (the clock-jump runs of the smoke profile check that).
func TestChaosClockChoice(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed")
	}
	var l lazyShim
	s, err := l.get(context.Background(), t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.remove()
	t.Logf("clock: %s", s.Tool())
	if !s.faketime && findLibfaketime() != "" && s.why == "" {
		t.Error("the shim was chosen over an installed libfaketime without a reason")
	}
	if _, err := os.Stat(s.lib); err != nil {
		t.Errorf("the clock library %s: %v", s.lib, err)
	}
	var c lazyShim
	cs, err := c.get(context.Background(), t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.remove()
	if cs.faketime || cs.why != "" {
		t.Errorf("without trying libfaketime: got %s", cs.Tool())
	}
}
