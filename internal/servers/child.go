package servers

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// child is one running server process and the goroutine that reaps it.
type child struct {
	cmd       *exec.Cmd
	done      chan struct{} // closed once cmd.Wait returned
	waitErr   error         // valid after done is closed
	logPath   string
	logOffset int64 // where this run's output starts in logPath
}

type childSpec struct {
	path    string
	args    []string
	env     []string // appended to the current environment
	dir     string   // working directory
	logPath string   // stdout and stderr are appended here
	cred    *syscall.Credential
}

// startChild starts spec as a foreground child in its own process group, so
// that Pause freezes the whole server (Redis rewrite children included) and
// no signal meant for it can reach the test binary.
func startChild(spec childSpec) (*child, error) {
	logFile, err := os.OpenFile(spec.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("servers: open log: %w", err)
	}
	// The child writes through its own copy of the descriptor, so ours can go
	// as soon as it has started; no copying goroutine is needed.
	defer logFile.Close()
	st, err := logFile.Stat()
	if err != nil {
		return nil, fmt.Errorf("servers: stat log: %w", err)
	}

	cmd := exec.Command(spec.path, spec.args...)
	cmd.Env = append(os.Environ(), spec.env...)
	cmd.Dir = spec.dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr(spec.cred)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("servers: start %s: %w", spec.path, err)
	}
	c := &child{
		cmd:       cmd,
		done:      make(chan struct{}),
		logPath:   spec.logPath,
		logOffset: st.Size(),
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the child's process group. Once the leader has been
// reaped its pid may be reused, so an exited child is never signalled.
func (c *child) signalGroup(sig syscall.Signal) error {
	if c.exited() {
		return errExited
	}
	err := syscall.Kill(-c.pid(), sig)
	if errors.Is(err, syscall.ESRCH) {
		return errExited
	}
	return err
}

var errExited = errors.New("servers: process has exited")

// pause stops the group with SIGSTOP and returns once the leader has
// stopped (see WaitStopped).
func (c *child) pause() error {
	if err := c.signalGroup(syscall.SIGSTOP); err != nil {
		return err
	}
	return WaitStopped(c.pid(), 5*time.Second)
}

// wait waits at most timeout for the child to exit and reports whether it did.
func (c *child) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// kill sends SIGKILL to the group and to every descendant, and waits until
// the leader was reaped and the descendants have exited.
func (c *child) kill() error {
	if c.exited() {
		return nil
	}
	// Stopped first so that it can neither fork a new child nor reap an old
	// one (whose pid could then be reused) while the tree is being listed.
	_ = c.signalGroup(syscall.SIGSTOP)
	desc := descendants(c.pid())
	for _, pid := range desc {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if err := c.signalGroup(syscall.SIGKILL); err != nil && !errors.Is(err, errExited) {
		return fmt.Errorf("servers: kill pid %d: %w", c.pid(), err)
	}
	deadline := time.Now().Add(30 * time.Second)
	if !c.wait(time.Until(deadline)) {
		return fmt.Errorf("servers: pid %d did not exit 30s after SIGKILL", c.pid())
	}
	for _, pid := range desc {
		for !gone(pid) {
			if time.Now().After(deadline) {
				return fmt.Errorf("servers: pid %d (child of %d) did not exit 30s after SIGKILL", pid, c.pid())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// stop resumes the group (a stopped process cannot act on SIGTERM), sends sig
// and escalates to SIGKILL after grace.
func (c *child) stop(sig syscall.Signal, grace time.Duration) error {
	if c.exited() {
		return nil
	}
	_ = c.signalGroup(syscall.SIGCONT)
	if err := c.signalGroup(sig); err != nil && !errors.Is(err, errExited) {
		return fmt.Errorf("servers: signal pid %d: %w", c.pid(), err)
	}
	if c.wait(grace) {
		return nil
	}
	return c.kill()
}

// logTail returns the last max bytes this run wrote to its log, for error
// messages that must say why a server did not come up.
func (c *child) logTail(limit int64) string {
	return readTail(c.logPath, c.logOffset, limit)
}

func readTail(path string, from, limit int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	start := max(from, st.Size()-limit)
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unavailable: %v)", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "(log is empty)"
	}
	return s
}

// startupError describes a server that did not come up, with its exit status
// when it died and the end of its log.
func (c *child) startupError(what string, cause error) error {
	status := "still running"
	if c.exited() {
		status = fmt.Sprintf("exited: %v", c.waitErr)
	}
	return fmt.Errorf("servers: %s did not come up (%s): %w\n--- log %s ---\n%s",
		what, status, cause, c.logPath, c.logTail(4096))
}
