package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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

// zkStartTries is how many times startZooKeeper starts an ensemble on
// fresh ports when a server could not bind one of its ports: a port
// freeLoopbackPorts found free may be taken by another process (or one of
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
