package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	srv "github.com/quorumlock/quorumlock/internal/servers"
)

// zkServer is one server of a zkEnsemble; it implements Node. It keeps
// its ports and data directory across Kill and Restart.
type zkServer struct {
	sid    int // ZooKeeper's server id, 1-based
	dir    string
	client int
	links  []*proxy // every link to or from this server
	image  string   // run in a container of this image ("": a child process)

	mu  sync.Mutex
	cmd *exec.Cmd
	end chan struct{} // closed once cmd was waited for
	ctr *srv.HostContainer
}

// configure writes s's data directory, its id and its configuration;
// view holds the quorum and election address s dials for each server.
func (s *zkServer) configure(view [][2]string) error {
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "myid"), []byte(strconv.Itoa(s.sid)+"\n"), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=50\nsyncLimit=5\n", zkTick.Milliseconds())
	fmt.Fprintf(&b, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n", s.dir, s.client)
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=%d\n", zkTTL.Milliseconds(), zkTTL.Milliseconds())
	// No admin web server (it would take port 8080 on every server), and
	// the one four-letter command the suite asks.
	b.WriteString("admin.enableServer=false\n4lw.commands.whitelist=srvr\n")
	for i, v := range view {
		fmt.Fprintf(&b, "server.%d=%s:%s\n", i+1, v[0], portOf(v[1]))
	}
	return os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(b.String()), 0o644)
}

// portOf is the port of a loopback address: a server line gives the
// election port after the quorum address.
func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

func (s *zkServer) launch(java string) error {
	if s.image != "" {
		c, err := srv.StartHostContainer(context.Background(), srv.HostContainerSpec{What: "zookeeper", Image: s.image,
			Cmd: []string{"zk-run", filepath.Join(s.dir, "zoo.cfg")}, Binds: []string{s.dir + ":" + s.dir}})
		if err != nil {
			return fmt.Errorf("chaos: start ZooKeeper container: %w", err)
		}
		s.mu.Lock()
		s.ctr = c
		s.mu.Unlock()
		return nil
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "zookeeper.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cp := zkJar
	if _, err := os.Stat(zkLogJar); err == nil {
		cp += ":" + zkLogJar
	}
	cmd := exec.Command(java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain",
		filepath.Join(s.dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = workerProcAttr() // own process group, killed with the suite
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: start ZooKeeper: %w", err)
	}
	end := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(end)
	}()
	s.mu.Lock()
	s.cmd, s.end = cmd, end
	s.mu.Unlock()
	return nil
}

// waitServing polls the server until it says it serves clients.
func (s *zkServer) waitServing(ctx context.Context) error {
	for {
		if _, err := zkMode(ctx, s.Addr()); err == nil {
			return nil
		}
		s.mu.Lock()
		end, ctr := s.end, s.ctr
		s.mu.Unlock()
		if ctr != nil {
			if !ctr.Running() {
				return errors.New("the server's container exited")
			}
			end = nil
		}
		select {
		case <-end:
			return errors.New("the server exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// zkMode asks the server at addr for its mode (leader, follower or
// standalone) with the srvr command; a server that is not part of a
// serving quorum answers that it is not serving, an error here.
func zkMode(ctx context.Context, addr string) (string, error) {
	d := net.Dialer{Timeout: 300 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	var first string
	for sc.Scan() {
		line := sc.Text()
		if first == "" {
			first = line
		}
		if mode, ok := strings.CutPrefix(line, "Mode: "); ok {
			return mode, nil
		}
	}
	if first == "" {
		first = "no answer"
	}
	return "", errors.New(first)
}

// logTail is the end of s's log for an error, led by the log's first
// exception line, which names the cause.
func (s *zkServer) logTail() string {
	if s.ctr != nil {
		return strings.ReplaceAll(s.ctr.Logs(), "\n", " | ")
	}
	b, _ := os.ReadFile(filepath.Join(s.dir, "zookeeper.log"))
	// The first exception names the cause; a Java stack trace after it
	// would push it out of the tail.
	var cause string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "Exception:") {
			cause = strings.TrimSpace(line) + " ... "
			break
		}
	}
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return cause + strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")
}

// Addr implements Node: the client address.
func (s *zkServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.client)) }

func (s *zkServer) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctr != nil {
		switch sig {
		case syscall.SIGSTOP:
			return s.ctr.Pause()
		case syscall.SIGCONT:
			return s.ctr.Resume()
		}
		return s.ctr.Kill()
	}
	if s.cmd == nil {
		return fmt.Errorf("chaos: ZooKeeper server %d is not running", s.sid)
	}
	select {
	case <-s.end:
		return fmt.Errorf("chaos: ZooKeeper server %d is not running", s.sid)
	default:
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil || sig != syscall.SIGSTOP {
		return err
	}
	return srv.WaitStopped(s.cmd.Process.Pid, 5*time.Second)
}

// Kill implements Node: SIGKILL, and wait until it is gone.
func (s *zkServer) Kill() error {
	if err := s.signal(syscall.SIGKILL); err != nil {
		return err
	}
	s.mu.Lock()
	end, ctr := s.end, s.ctr
	s.mu.Unlock()
	if ctr == nil {
		<-end
	}
	return nil
}

// Restart implements Node: the server starts again with its data.
func (s *zkServer) Restart(ctx context.Context) error {
	s.mu.Lock()
	ctr := s.ctr
	s.mu.Unlock()
	if ctr != nil {
		wctx, cancel := context.WithTimeout(ctx, zkStartTimeout)
		defer cancel()
		if err := ctr.Restart(wctx, nil); err != nil {
			return err
		}
		return s.waitServing(wctx)
	}
	_ = s.Stop()
	java, err := exec.LookPath("java")
	if err != nil {
		return err
	}
	if err := s.launch(java); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, zkStartTimeout)
	defer cancel()
	return s.waitServing(wctx)
}

// Pause implements Node (SIGSTOP); Resume undoes it.
func (s *zkServer) Pause() error  { return s.signal(syscall.SIGSTOP) }
func (s *zkServer) Resume() error { return s.signal(syscall.SIGCONT) }

// Stop implements Node: the server ends (a stopped one is resumed first,
// so that it can).
func (s *zkServer) Stop() error {
	s.mu.Lock()
	cmd, end, ctr := s.cmd, s.end, s.ctr
	s.mu.Unlock()
	if ctr != nil {
		return ctr.Stop()
	}
	if cmd == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-end
	return nil
}

// Isolate cuts the server off from its peers (on) or heals it: every
// byte between it and another server is dropped, while its clients still
// reach it.
func (s *zkServer) Isolate(on bool) error {
	for _, p := range s.links {
		if on {
			p.Blackhole(true)
		} else {
			p.Heal()
		}
	}
	return nil
}
