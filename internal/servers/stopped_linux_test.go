package servers

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WaitStopped says so when a process does not stop in time, returns once
// a SIGSTOP has stopped it, and does not wait for a process that is gone.
func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	pid := cmd.Process.Pid

	err := WaitStopped(pid, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still running") {
		t.Errorf("no SIGSTOP sent: WaitStopped = %v, want a running-threads error", err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := WaitStopped(pid, 5*time.Second); err != nil {
		t.Errorf("after SIGSTOP: %v", err)
	}
	if n, err := runningThreads(pid); err != nil || n != 0 {
		t.Errorf("after WaitStopped: %d threads running (%v), want 0", n, err)
	}

	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	exited = true
	start := time.Now()
	if err := WaitStopped(pid, 5*time.Second); err != nil || time.Since(start) > time.Second {
		t.Errorf("exited process: WaitStopped = %v after %v, want nil at once", err, time.Since(start))
	}
}
