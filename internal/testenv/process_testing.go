package testenv

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
)

// BuildCommand builds the Go program in the package directory pkg (".":
// the test's own) into a new temporary directory named after name, for a
// TestMain whose tests run it as a real process: exit codes, signals and
// process groups are then the ones users get. It returns the binary's path
// and a function that removes it.
func BuildCommand(name, pkg string) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Result is how a Process ended.
type Result struct {
	Code           int // the exit code; -1 when it could not be waited for
	Stdout, Stderr string
	Elapsed        time.Duration // from the start to the exit
}

// Process is a program a test started with StartProcess.
type Process struct {
	Cmd            *exec.Cmd
	Stdout, Stderr *Buffer   // what it wrote so far
	Started        time.Time // when it was started
	done           chan struct{}
	res            Result
}

// StartProcess starts bin with args, in dir when it is not empty, with this
// process's environment minus every QUORUMLOCK_* variable, plus env. The
// process is killed when the test ends if it still runs.
func StartProcess(t testing.TB, bin, dir string, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(environWithout("QUORUMLOCK_"), env...)
	p := &Process{Cmd: cmd, Stdout: &Buffer{}, Stderr: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Stdout, p.Stderr
	// A leaked grandchild holding the output pipes must not hang the test.
	cmd.WaitDelay = 5 * time.Second
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", filepath.Base(bin), err)
	}
	go func() {
		defer close(p.done)
		err := cmd.Wait()
		p.res = Result{Code: cmd.ProcessState.ExitCode(), Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Elapsed: time.Since(p.Started)}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.res.Code = -1
			p.res.Stderr += "\n(wait: " + err.Error() + ")"
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

// Wait returns the result, killing the process and failing the test if it
// runs past timeout.
func (p *Process) Wait(t testing.TB, timeout time.Duration) Result {
	t.Helper()
	select {
	case <-p.done:
		return p.res
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s %q ran longer than %v\nstderr: %s", filepath.Base(p.Cmd.Path), p.Cmd.Args[1:], timeout, p.Stderr.String())
		return Result{}
	}
}

// Done is closed once the process has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Signal sends sig to the process.
func (p *Process) Signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.Cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// environWithout is this process's environment without the variables
// whose names start with prefix.
func environWithout(prefix string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			out = append(out, kv)
		}
	}
	return out
}
