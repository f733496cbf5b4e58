package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// proc is one worker process as the coordinator sees it.
type proc struct {
	id     int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	gates  chan gateEvent
	done   atomic.Int64
	exited chan struct{}

	mu     sync.Mutex
	stats  *workerStats
	stderr bytes.Buffer
	killed bool
}

// startWorker starts a worker process with cfg.
func startWorker(newCmd func() (*exec.Cmd, error), cfg workerConfig) (*proc, error) {
	cmd, err := newCmd()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(os.Environ(), WorkerEnv+"="+string(b))
	cmd.SysProcAttr = workerProcAttr()
	p := &proc{id: cfg.ID, cmd: cmd, gates: make(chan gateEvent, 16), exited: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.line(sc.Text())
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) line(s string) {
	m, ok := parseMessage(s)
	switch {
	case !ok:
	case m.gate != nil:
		p.gates <- *m.gate
	case m.done != nil:
		p.done.Store(*m.done)
	case m.stats != nil:
		p.mu.Lock()
		p.stats = m.stats
		p.mu.Unlock()
	}
}

// errGateTimeout is waitGate's error when the worker did not reach the
// gate in time.
var errGateTimeout = errors.New("gate not reached in time")

// waitGate waits for the worker to stop at gate g.
func (p *proc) waitGate(ctx context.Context, g gatePoint, timeout time.Duration) (gateEvent, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ev := <-p.gates:
		if ev.gate != g {
			return ev, fmt.Errorf("chaos: worker %d stopped at gate %q, expected %q", p.id, ev.gate, g)
		}
		return ev, nil
	case <-p.exited:
		return gateEvent{}, fmt.Errorf("chaos: worker %d exited before gate %q: %s", p.id, g, p.errTail())
	case <-t.C:
		return gateEvent{}, fmt.Errorf("chaos: worker %d did not reach gate %q within %v: %w", p.id, g, timeout, errGateTimeout)
	case <-ctx.Done():
		return gateEvent{}, ctx.Err()
	}
}

// answer lets the worker past the gate it waits at.
func (p *proc) answer() error {
	_, err := io.WriteString(p.stdin, "go\n")
	return err
}

// waitDone waits until the worker has n accepted sections, or timeout.
func (p *proc) waitDone(ctx context.Context, n int64, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.done.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-p.exited:
			return p.done.Load() >= n
		case <-time.After(2 * time.Millisecond):
		}
	}
	return true
}

func (p *proc) signal(sig syscall.Signal) error {
	select {
	case <-p.exited:
		return errors.New("chaos: worker already exited")
	default:
	}
	return p.cmd.Process.Signal(sig)
}

// freeze stops the worker with SIGSTOP and returns once it has stopped:
// kill(2) only queues the signal, and a loaded machine was seen letting a
// worker past its gate and through its write before the stop took hold.
func (p *proc) freeze() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return srv.WaitStopped(p.cmd.Process.Pid, 5*time.Second)
}
func (p *proc) thaw() error { return p.signal(syscall.SIGCONT) }

// kill ends the worker with SIGKILL (a crash).
func (p *proc) kill() error {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	_ = p.thaw()
	err := p.signal(syscall.SIGKILL)
	<-p.exited
	return err
}

// stop ends a worker that outlived its run: resume, SIGTERM, then SIGKILL.
func (p *proc) stop() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.thaw()
	_ = p.signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		_ = p.signal(syscall.SIGKILL)
		<-p.exited
	}
}

func (p *proc) result() (*workerStats, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats, p.killed
}

func (p *proc) errTail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := strings.TrimSpace(p.stderr.String())
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	if s == "" {
		return "(no output on stderr)"
	}
	return s
}
