package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
		dir, err := os.MkdirTemp("", "quorumlock-chaos-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binPath = filepath.Join(dir, "quorumlock-chaos")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
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
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *testenv.Buffer
	done           chan struct{}
	res            result
}

// startCLI starts the binary with args in dir, with this process's
// environment minus every QUORUMLOCK_* variable, plus env. The process is
// killed when the test ends if it still runs.
func startCLI(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	p := &proc{cmd: cmd, stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	// A leaked grandchild holding the output pipes must not hang the test.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatalf("start quorumlock-chaos: %v", err)
	}
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		p.res = result{code: cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.res.code = -1
			p.res.stderr += "\n(wait: " + err.Error() + ")"
		}
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait returns the result, failing the test if the process runs past
// cliTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(cliTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("quorumlock-chaos %q ran longer than %v\nstderr: %s", p.cmd.Args[1:], cliTimeout, p.stderr.String())
		return result{}
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// runCLI runs the binary to completion.
func runCLI(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return startCLI(t, dir, env, args...).wait(t)
}

func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUORUMLOCK_") {
			out = append(out, kv)
		}
	}
	return out
}
