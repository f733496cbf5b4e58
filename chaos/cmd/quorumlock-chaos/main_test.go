package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// binPath is the quorumlock-chaos binary under test, built once by
// TestMain: the tests run it as a real process, so exit codes, signals and
// the worker processes it starts of itself are the ones users get.
var binPath string

func TestMain(m *testing.M) {
	code := func() int {
		path, cleanup, err := testenv.BuildCommand("quorumlock-chaos", ".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		binPath = path
		return m.Run()
	}()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cliTimeout bounds every process a test starts; generous, the machine may
// be busy.
const cliTimeout = 60 * time.Second

type result struct {
	code   int
	stdout string
	stderr string
}

// proc is a quorumlock-chaos process started by a test.
type proc struct{ *testenv.Process }

// startCLI starts the binary with args in dir, with this process's
// environment minus every QUORUMLOCK_* variable, plus env. The process is
// killed when the test ends if it still runs.
func startCLI(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	return &proc{testenv.StartProcess(t, binPath, dir, env, args...)}
}

// wait returns the result, failing the test if the process runs past
// cliTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	r := p.Wait(t, cliTimeout)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.Signal(t, sig)
}

// runCLI runs the binary to completion.
func runCLI(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return startCLI(t, dir, env, args...).wait(t)
}
