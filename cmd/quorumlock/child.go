//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

func (s *session) onSignal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		if stopsWaiting(sig) {
			s.cancelLock(signalError{sig})
		}
		return
	}
	if s.child != nil {
		s.signalChild(sig)
	}
}

// signalChild sends sig to the command (its whole process group when it
// has one). s.mu must be held and s.child set.
func (s *session) signalChild(sig syscall.Signal) {
	if s.group {
		_ = syscall.Kill(-s.child.Process.Pid, sig)
		return
	}
	_ = s.child.Process.Signal(sig)
}

// holding runs the command while Do keeps the lease; ctx ends when the
// lease is lost or ends.
func (s *session) holding(ctx context.Context, l *redlock.Lease) error {
	// Print the settings' warnings before the command's own output.
	s.persist.settle()
	s.mu.Lock()
	if err := context.Cause(s.lockCtx); err != nil {
		// The wait ended just as the lock came: do not start.
		s.mu.Unlock()
		return err
	}
	s.started = true
	s.heldSince, s.lease = time.Now(), l
	cmd := exec.Command(s.path, s.rc.command[1:]...)
	cmd.Args[0] = s.rc.command[0]
	cmd.Env = childEnv(os.Environ(), s.rc.fence, l.FencingToken())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, s.stdout, s.stderr
	cmd.SysProcAttr = procAttr(s.group)
	if err := cmd.Start(); err != nil {
		s.execErr = err
		s.mu.Unlock()
		return nil
	}
	s.child = cmd
	s.mu.Unlock()
	s.logger.Info("lock obtained; command started", "key", l.Key(), "fencing_token", l.FencingToken(), "pid", cmd.Process.Pid, "valid_until", l.Deadline().Format(time.RFC3339Nano))

	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(exited)
	}()

	select {
	case <-exited:
		// A lease that ended before the exit was seen may have ended before
		// the command finished: report it as lost, to be safe.
		select {
		case <-l.Done():
			s.lost = errors.New("the lease ended before the command's exit was seen")
		default:
		}
	case <-ctx.Done():
		s.lost = context.Cause(ctx)
		s.terminated = true
		s.terminate(exited)
	}
	s.mu.Lock()
	s.child = nil
	s.mu.Unlock()
	s.status = exitStatus(cmd.ProcessState)
	return nil
}

// terminate stops the command after its lease ended: SIGTERM, then SIGKILL
// after the grace period. The group gets SIGKILL even when the command
// exited in time, so that nothing it started goes on without the lock.
func (s *session) terminate(exited <-chan struct{}) {
	fmt.Fprintf(s.stderr, "quorumlock run: lease on %q lost while the command ran (%s); sending SIGTERM\n", s.rc.key, s.lostReason())
	s.mu.Lock()
	s.signalChild(syscall.SIGTERM)
	s.mu.Unlock()
	t := time.NewTimer(s.rc.grace.d)
	defer t.Stop()
	select {
	case <-exited:
		if s.group {
			s.mu.Lock()
			s.signalChild(syscall.SIGKILL)
			s.mu.Unlock()
		}
	case <-t.C:
		fmt.Fprintf(s.stderr, "quorumlock run: command still running %v after SIGTERM; sending SIGKILL\n", s.rc.grace.d)
		s.mu.Lock()
		s.signalChild(syscall.SIGKILL)
		s.mu.Unlock()
		<-exited
	}
}

func (s *session) lostReason() string {
	if errors.Is(s.lost, redlock.ErrMaxHold) || (s.rc.maxHold.set && time.Since(s.heldSince) >= s.rc.maxHold.d) {
		return fmt.Sprintf("held for --max-hold %v, so renewal stopped and it ran out", s.rc.maxHold.d)
	}
	if s.lost == nil {
		return "unknown cause"
	}
	// A majority no longer holding it shows as a deadline still ahead.
	if s.lease != nil && time.Now().Before(s.lease.Deadline()) {
		return "a majority of nodes no longer hold it: it expired, was deleted, or was taken over"
	}
	return "its validity ran out before a renewal reached a majority of nodes"
}

// childEnv is the command's environment: ours, without the node password
// and without any fencing token inherited from an outer quorumlock (a
// stale token would let the command pass a fence it does not hold).
func childEnv(env []string, fence bool, token uint64) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, envFencingToken+"=") || strings.HasPrefix(kv, envPassword+"=")
	})
	if fence {
		out = append(out, fmt.Sprintf("%s=%d", envFencingToken, token))
	}
	return out
}
