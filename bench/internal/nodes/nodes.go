// Package nodes starts throw-away redis-server processes for the benchmark:
// children of this process on free loopback ports, without persistence,
// each in its own temporary directory. It is deliberately small; the main
// module's internal/testenv is the full-featured starter for tests.
package nodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Node is one running redis-server.
type Node struct {
	Addr string // 127.0.0.1:port
	cmd  *exec.Cmd
	dir  string
	done chan struct{} // closed when the process has exited
}

// Set is a group of nodes started together. Its methods are safe for
// concurrent use; Stop may be called more than once.
type Set struct {
	Nodes []*Node

	mu      sync.Mutex
	stopped bool
	frozen  map[int]bool
}

// Start starts n redis-server processes using the binary bin (looked up on
// PATH when it has no slash) and waits until each answers PING. On error it
// stops the ones it started.
func Start(ctx context.Context, bin string, n int) (*Set, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server not found (install it, or pass --redis-server): %w", err)
	}
	s := &Set{frozen: map[int]bool{}}
	for range n {
		nd, err := startOne(ctx, path)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Nodes = append(s.Nodes, nd)
	}
	return s, nil
}

// startOne picks a free port and starts a node on it, retrying with another
// port if someone else took it in between.
func startOne(ctx context.Context, bin string) (*Node, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "qlbench-redis-")
		if err != nil {
			return nil, err
		}
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"),
			"--maxmemory-policy", "noeviction")
		cmd.SysProcAttr = sysProcAttr()
		if err := cmd.Start(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		nd := &Node{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
		go func() { _ = cmd.Wait(); close(nd.done) }()
		if lastErr = nd.waitReady(ctx); lastErr == nil {
			return nd, nil
		}
		nd.kill()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("starting redis-server: %w", lastErr)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the node with an inline PING until it answers PONG, the
// process exits, or 10 s pass.
func (nd *Node) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-nd.done:
			log, _ := os.ReadFile(filepath.Join(nd.dir, "redis.log"))
			return fmt.Errorf("redis-server on %s exited: %s", nd.Addr, tail(log, 400))
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if ping(nd.Addr) == nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer PING within 10s", nd.Addr)
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := c.Read(buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", buf)
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Freeze sends SIGSTOP to node i: it keeps its sockets but answers nothing,
// like a stalled host, until Thaw.
func (s *Set) Freeze(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return errors.New("nodes: stopped")
	}
	if err := s.Nodes[i].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.frozen[i] = true
	return nil
}

// Thaw sends SIGCONT to node i.
func (s *Set) Thaw(i int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || !s.frozen[i] {
		return nil
	}
	delete(s.frozen, i)
	return s.Nodes[i].cmd.Process.Signal(syscall.SIGCONT)
}

// ThawAll resumes every frozen node.
func (s *Set) ThawAll() {
	for i := range s.Nodes {
		_ = s.Thaw(i)
	}
}

// Stop resumes and terminates every node (SIGTERM, then SIGKILL after 3 s),
// waits for them and removes their directories.
func (s *Set) Stop() {
	s.ThawAll()
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, nd := range s.Nodes {
		wg.Go(nd.kill)
	}
	wg.Wait()
}

func (nd *Node) kill() {
	_ = nd.cmd.Process.Signal(syscall.SIGCONT)
	_ = nd.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-nd.done:
	case <-time.After(3 * time.Second):
		_ = nd.cmd.Process.Kill()
		<-nd.done
	}
	os.RemoveAll(nd.dir)
}
