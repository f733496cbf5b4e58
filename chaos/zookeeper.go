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

// The ZooKeeper ensemble's timing. tickTime is ZooKeeper's unit: the
// server allows sessions of 2 to 20 ticks and expires them in buckets of
// one tick. Both session bounds are pinned to zkTTL, so a client cannot
// be given a session other than the one it asked for (the lease the
// history is checked against).
const (
	zkTick = 200 * time.Millisecond
	zkTTL  = time.Second
	// zkStartTimeout bounds the start of an ensemble: three JVMs starting
	// at once on a loaded machine took 15 s.
	zkStartTimeout = 90 * time.Second
)

// zkJar is Debian's ZooKeeper (package zookeeper, pulled in by
// zookeeperd); its manifest names the jars it needs.
const zkJar = "/usr/share/java/zookeeper.jar"

// zkLogJar, where installed (Debian: libslf4j-java), gives the servers a
// log: without a binding for its logging API, ZooKeeper logs nothing.
const zkLogJar = "/usr/share/java/slf4j-simple.jar"

// ZooKeeperInstalled reports why the local backend cannot start the zk-3
// topology's servers (no Java runtime, or no ZooKeeper jar), or nil: the
// one check the suite and its tests share.
func ZooKeeperInstalled() error {
	_, lerr := exec.LookPath("java")
	_, serr := os.Stat(zkJar)
	if lerr != nil || serr != nil {
		return fmt.Errorf("chaos: ZooKeeper is not installed (Debian: apt-get install zookeeperd): %w", errors.Join(lerr, serr))
	}
	return nil
}

// zkEnsemble is a ZooKeeper ensemble whose servers run as children of
// this process. Every link between two servers runs through a proxy of
// its own, one per direction and port (server a dials server b through
// the address a's configuration gives for b), so that one server can be
// cut off from its peers while its clients still reach it.
type zkEnsemble struct {
	dir     string
	servers []*zkServer
	links   []*proxy
}

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

// zkStartTries is how many times startZooKeeper starts an ensemble on
// fresh ports when a server could not bind one of its ports: a port
// freeLoopbackPort found free may be taken by another process (or one of
// the ensemble's own proxies) before the server binds it, as a CI run
// under load saw once ("Use zookeeper.electionPortBindRetry property").
const zkStartTries = 3

// errZKPortTaken marks a start that failed because a server found one of
// its ports taken.
var errZKPortTaken = errors.New("a ZooKeeper server's port was taken before it bound it")

// startZooKeeper starts an ensemble of n servers on loopback ports and
// returns once every server serves clients (an elected leader and its
// followers). With an image, each server runs in a container of it on the
// host's network, with the same files (bind-mounted) and ports. On failure
// nothing is left running. A start that fails because a port was taken is
// tried again on new ports, up to zkStartTries times in all.
func startZooKeeper(ctx context.Context, n int, image string) (*zkEnsemble, error) {
	var errs []error
	for range zkStartTries {
		z, err := startZooKeeperOnce(ctx, n, image)
		if err == nil {
			return z, nil
		}
		if !errors.Is(err, errZKPortTaken) || ctx.Err() != nil {
			return nil, errors.Join(append(errs, err)...)
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

// portTaken reports whether a server's log says it could not bind a port.
func portTaken(log string) bool {
	for _, s := range []string{"BindException", "Address already in use", "PortBindRetry"} {
		if strings.Contains(log, s) {
			return true
		}
	}
	return false
}

func startZooKeeperOnce(ctx context.Context, n int, image string) (_ *zkEnsemble, err error) {
	java := ""
	if image == "" {
		if err := ZooKeeperInstalled(); err != nil {
			return nil, err
		}
		java, _ = exec.LookPath("java")
	}
	dir, err := os.MkdirTemp("", "chaos-zk-")
	if err != nil {
		return nil, err
	}
	z := &zkEnsemble{dir: dir}
	defer func() {
		if err != nil {
			_ = z.stop()
		}
	}()
	// Each server's three ports: client, quorum (follower to leader) and
	// leader election.
	// Drawn all at once, so that no two are the same: a port drawn twice
	// (a server's client port also its quorum port) is an invalid
	// configuration ZooKeeper refuses, which a stress run once hit.
	free, err := freeLoopbackPorts(3 * n)
	if err != nil {
		return nil, err
	}
	ports := make([][3]int, n)
	for i := range ports {
		for k := range 3 {
			ports[i][k] = free[3*i+k]
		}
	}
	for i := range n {
		z.servers = append(z.servers, &zkServer{sid: i + 1, dir: filepath.Join(dir, strconv.Itoa(i+1)), client: ports[i][0], image: image})
	}
	// view[a][b] is the quorum and election address server a dials for b.
	view := make([][][2]string, n)
	for a := range n {
		view[a] = make([][2]string, n)
		for b := range n {
			for k := range 2 {
				target := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[b][k+1]))
				if a == b {
					view[a][b][k] = target
					continue
				}
				p, err := newProxy(target)
				if err != nil {
					return nil, err
				}
				z.links = append(z.links, p)
				z.servers[a].links = append(z.servers[a].links, p)
				z.servers[b].links = append(z.servers[b].links, p)
				view[a][b][k] = p.Addr()
			}
		}
	}
	for a, s := range z.servers {
		if err := s.configure(view[a]); err != nil {
			return nil, err
		}
		if err := s.launch(java); err != nil {
			return nil, err
		}
	}
	sctx, cancel := context.WithTimeout(ctx, zkStartTimeout)
	defer cancel()
	for _, s := range z.servers {
		if err := s.waitServing(sctx); err != nil {
			log := s.logTail()
			if portTaken(log) {
				err = errors.Join(err, errZKPortTaken)
			}
			return nil, fmt.Errorf("chaos: ZooKeeper server %d did not start: %w (log: %s)", s.sid, err, log)
		}
	}
	return z, nil
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

// stop ends every server and removes what they wrote.
func (z *zkEnsemble) stop() error {
	var err error
	for _, s := range z.servers {
		err = errors.Join(err, s.Stop())
	}
	for _, p := range z.links {
		_ = p.Close()
	}
	return errors.Join(err, os.RemoveAll(z.dir))
}

// freeLoopbackPorts asks the kernel for n different unused ports: each
// stays bound until all are drawn, so none is handed out twice. Another
// process may take one before the server binds it; the start then fails,
// with the server's log.
func freeLoopbackPorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
