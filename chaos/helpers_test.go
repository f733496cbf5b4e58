package chaos_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
)

func workerCommand() (*exec.Cmd, error) {
	return exec.Command(os.Args[0], "-test.run=^$"), nil
}

// backend returns a local backend closed with the test, or skips (fails
// in CI) when redis-server is missing.
func backend(t *testing.T) *chaos.LocalBackend {
	t.Helper()
	b, err := chaos.NewLocalBackend()
	if err != nil {
		if os.Getenv("CI") == "true" || os.Getenv("QUORUMLOCK_REQUIRE_BACKENDS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}

func runProfile(t *testing.T, p chaos.Profile, seed uint64, history string) *chaos.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, p, seed, chaos.Options{Backend: backend(t), WorkerCommand: workerCommand, Log: testLog{t}, History: history})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// failedRun reports a run that failed its expectations, with what its
// fault did (the notes a timing failure is diagnosed from).
func failedRun(t *testing.T, r chaos.Result) {
	t.Helper()
	t.Errorf("%s/%s/%s (seed %d): %s\n  what the fault did: %s", r.Topology, r.Fault, r.Fencing, r.Seed,
		strings.Join(r.Failure, "; "), strings.Join(r.Schedule, "; "))
}

type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// leftovers looks for processes this test binary started that are still
// alive: redis-server, postgres, or workers (re-executions of this binary).
func leftovers() error {
	me := os.Getpid()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == me {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == me {
			cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			found = append(found, fmt.Sprintf("pid %d: %s", pid, strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	if len(found) > 0 {
		return fmt.Errorf("chaos: processes left running: %s", strings.Join(found, "; "))
	}
	return nil
}
