package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// binPath is the quorumlock binary under test, built once by TestMain:
// the tests run it as a real process, so exit codes, signals and process
// groups are the ones users get.
var binPath string

func TestMain(m *testing.M) {
	code := func() int {
		path, cleanup, err := testenv.BuildCommand("quorumlock", ".")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer cleanup()
		binPath = path
		return m.Run()
	}()
	os.Exit(testenv.Finish(code))
}

// cliTimeout bounds every quorumlock process a test starts; generous, the
// machine may be busy.
const cliTimeout = 60 * time.Second

type result struct {
	code    int
	stdout  string
	stderr  string
	elapsed time.Duration
}

// proc is a quorumlock process started by a test.
type proc struct{ *testenv.Process }

// startCLI starts quorumlock with args, in dir when it is not empty, with
// this process's environment minus every QUORUMLOCK_* variable, plus env.
// The process is killed when the test ends if it still runs.
func startCLI(t *testing.T, dir string, env []string, args ...string) *proc {
	t.Helper()
	return &proc{testenv.StartProcess(t, binPath, dir, env, args...)}
}

// wait returns the result, failing the test if the process runs past
// cliTimeout.
func (p *proc) wait(t *testing.T) result {
	t.Helper()
	r := p.Wait(t, cliTimeout)
	return result{code: r.Code, stdout: r.Stdout, stderr: r.Stderr, elapsed: r.Elapsed}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	p.Signal(t, sig)
}

// runCLI runs quorumlock to completion.
func runCLI(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return startCLI(t, dir, env, args...).wait(t)
}

// redisNodes starts n nodes of a new deployment and bootstraps it with the
// default settings, as an operator would before the first client.
func redisNodes(t *testing.T, n int, opts ...testenv.RedisOption) []*testenv.RedisNode {
	t.Helper()
	nodes := emptyRedisNodes(t, n, opts...)
	r := runCLI(t, "", nil, "bootstrap", "--nodes", nodesArg(nodes))
	if r.code != 0 {
		t.Fatalf("bootstrap: exit %d: %s", r.code, r.stderr)
	}
	return nodes
}

// emptyRedisNodes starts n nodes nobody has used, and checks that each
// address reaches the process started for it. testenv's readiness PING can
// be answered by another server that holds the same port (a parallel start
// that drew the same free port, or another test binary); such a set is
// discarded.
func emptyRedisNodes(t *testing.T, n int, opts ...testenv.RedisOption) []*testenv.RedisNode {
	t.Helper()
	for attempt := 1; ; attempt++ {
		nodes := testenv.RedisNodes(t, n, opts...)
		err := ownProcesses(nodes)
		if err == nil {
			return nodes
		}
		if attempt == 3 {
			t.Fatal(err)
		}
		t.Logf("starting nodes again: %v", err)
	}
}

func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func ownProcesses(nodes []*testenv.RedisNode) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		info, err := c.Info(ctx, "server").Result()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Addr(), err)
		}
		if pid := infoField(info, "process_id"); pid != strconv.Itoa(n.PID()) {
			return fmt.Errorf("node %s answers as pid %s, but its process is %d", n.Addr(), pid, n.PID())
		}
	}
	return nil
}

// setPassword makes every node require password from now on.
func setPassword(t *testing.T, nodes []*testenv.RedisNode, password string) {
	t.Helper()
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		err := c.ConfigSet(context.Background(), "requirepass", password).Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

func nodesArg(nodes []*testenv.RedisNode) string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return strings.Join(addrs, ",")
}

// waitFile waits until path exists, failing the test after d.
func waitFile(t *testing.T, path string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// trapListener is a TCP listener that counts connections: given as a node
// to commands that must not contact any node.
type trapListener struct {
	ln    net.Listener
	mu    sync.Mutex
	conns int
	done  chan struct{}
}

func newTrap(t *testing.T) *trapListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trapListener{ln: ln, done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.mu.Lock()
			tr.conns++
			tr.mu.Unlock()
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-tr.done })
	return tr
}

func (tr *trapListener) addr() string { return tr.ln.Addr().String() }

func (tr *trapListener) count() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.conns
}

// keyAbsent checks that no node holds key (the lock was released).
func keyAbsent(t *testing.T, nodes []*testenv.RedisNode, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes {
		c := n.Client(t)
		if v, err := c.Exists(ctx, key).Result(); err != nil || v != 0 {
			t.Errorf("node %s: key %q still there (exists=%d, err=%v)", n.Addr(), key, v, err)
		}
	}
}
