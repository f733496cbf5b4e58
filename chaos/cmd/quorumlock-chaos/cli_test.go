package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
)

func TestChaosCLIBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"unknown profile", []string{"--profile", "fast"}, `unknown profile "fast"`},
		{"unknown fault", []string{"--fault", "kill-9"}, `unknown fault "kill-9"`},
		{"unknown topology", []string{"--topology", "triple"}, `unknown topology "triple"`},
		{"unknown fencing", []string{"--fencing", "paper"}, `unknown fencing mode "paper"`},
		{"run matching nothing", []string{"--run", "stall=7%"}, `no run whose name contains "stall=7%"`},
		{"run filtered away", []string{"--fencing", "fence-table", "--run", "kill-3"}, `no run whose name contains "kill-3"`},
		{"unknown backend", []string{"--backend", "cloud"}, `unknown backend "cloud"`},
		{"bad seed", []string{"--seed", "-3"}, `--seed "-3"`},
		{"poll not a duration", []string{"--poll", "fast"}, `invalid value "fast" for flag -poll`},
		{"poll out of range", []string{"--poll", "2s"}, "poll interval 2s out of range"},
		{"poll without stall runs", []string{"--profile", "smoke", "--poll", "100ms"}, "polling applies to the stall runs"},
		{"stray argument", []string{"now"}, `unexpected argument "now"`},
		{"election and transfers", []string{"--election", "--transfers"}, "--election and --transfers each give the workers a style"},
		{"transfers without redlock runs", []string{"--topology", "etcd-3", "--transfers"}, "the transfers apply to runs on redlock topologies"},
		{"duration without timed runs", []string{"--profile", "smoke", "--duration", "1h"}, "profile smoke has no timed runs"},
		{"duration too short", []string{"--profile", "soak", "--duration", "5s"}, "duration 5s is too short"},
		{"soak run beyond the duration", []string{"--profile", "soak", "--duration", "25m", "--run", "#4"}, `no run whose name contains "#4"`},
		{"duration not a duration", []string{"--profile", "soak", "--duration", "long"}, `invalid value "long" for flag -duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, t.TempDir(), nil, tc.args...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, exitUsage, tc.msg)
			}
		})
	}
}

// TestChaosCLIHelp: --help names this binary and its flags, exits 0, and
// keeps the worker mode out of sight.
func TestChaosCLIHelp(t *testing.T) {
	r := runCLI(t, t.TempDir(), nil, "--help")
	if r.code != exitOK {
		t.Fatalf("exit %d, stderr %q; want %d", r.code, r.stderr, exitOK)
	}
	for _, want := range []string{"Usage: quorumlock-chaos [--profile", "\n  --profile name\n", "\n  --seed N\n", "\n  --topology topologies\n", "130  interrupted"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help lacks %q:\n%s", want, r.stdout)
		}
	}
	// Flags in the same style as quorumlock run's (--ttl duration), and
	// the accepted values of each filter listed, from the registries.
	if strings.Contains(r.stdout, "\n  -profile") {
		t.Errorf("--help uses single-dash flags:\n%s", r.stdout)
	}
	for flag, values := range map[string][]string{
		"--topology": chaos.TopologyNames(), "--fault": chaos.FaultNames(),
		"--fencing": chaos.FencingModes(), "--profile": chaos.Profiles,
	} {
		_, doc, _ := strings.Cut(r.stdout, "\n  "+flag+" ")
		doc, _, _ = strings.Cut(doc, "\n  --")
		for _, v := range values {
			if !strings.Contains(doc, v) {
				t.Errorf("--help of %s does not list %q:\n%s", flag, v, doc)
			}
		}
	}
	if strings.Contains(r.stdout, "quorumlock-chaos "+workerArg) {
		t.Errorf("--help mentions the hidden %q mode:\n%s", workerArg, r.stdout)
	}
}

// TestChaosCLIWorkerNeedsTheSuite: the worker mode run by hand, without
// the configuration the suite passes in the environment, refuses with a
// usage error instead of running anything.
func TestChaosCLIWorkerNeedsTheSuite(t *testing.T) {
	r := runCLI(t, t.TempDir(), nil, workerArg)
	if r.code != exitUsage || !strings.Contains(r.stderr, "workers are started by the chaos suite") {
		t.Errorf("exit %d, stderr %q; want %d and a message that the suite starts workers", r.code, r.stderr, exitUsage)
	}
}

func TestChaosCLIMissingBinaries(t *testing.T) {
	r := runCLI(t, t.TempDir(), []string{"PATH=" + t.TempDir()}, "--profile", "smoke")
	if r.code != exitVerdict || !strings.Contains(r.stderr, "redis-server") || !strings.Contains(r.stderr, "not installed") {
		t.Errorf("exit %d, stderr %q; want %d and a message naming redis-server", r.code, r.stderr, exitVerdict)
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestChaosCLIPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	r := runCLI(t, t.TempDir(), nil, "--profile", "smoke", "--postgres-port", port)
	if r.code != exitVerdict || !strings.Contains(r.stderr, "port "+port+" on 127.0.0.1 is in use") {
		t.Errorf("exit %d, stderr %q; want %d and a port-in-use message", r.code, r.stderr, exitVerdict)
	}
}

// TestChaosCLIReport runs two short runs through the binary and checks
// the JSON report's required fields.
func TestChaosCLIReport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and PostgreSQL")
	}
	dir := t.TempDir()
	r := runCLI(t, dir, nil, "--profile", "smoke", "--fault", "kill-3,kill-2", "--seed", "5",
		"--json", "r.json", "--markdown", "r.md")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "seed 5") {
		t.Errorf("the seed is not printed: %s", r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Runs []map[string]any `json:"runs"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != 2 {
		t.Fatalf("%d runs in the report, want 2", len(rep.Runs))
	}
	for _, run := range rep.Runs {
		for _, k := range []string{"topology", "fault", "fencing", "sections", "lost_updates", "overlaps", "rejected", "seed"} {
			if _, ok := run[k]; !ok {
				t.Errorf("run %v lacks %q", run["fault"], k)
			}
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "r.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| redlock-5 | kill-3 |", "`quorumlock-chaos --profile smoke --seed 5` reproduces it"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("the markdown report lacks %q:\n%s", want, md)
		}
	}
}

// TestChaosCLIInterrupt: Ctrl-C ends the suite with 130 and leaves no
// server running (their fixed ports are free again).
func TestChaosCLIInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server and PostgreSQL")
	}
	// Ports found free can be taken by another package's servers before
	// the suite binds them (it then exits 1 at once, which failed a CI
	// run): such a start is tried again on other ports.
	var p *proc
	var pg, rd int
	for try := 1; p == nil; try++ {
		pg, rd = freeTCPPort(t), freePortBlock(t, 5)
		q := startCLI(t, t.TempDir(), nil, "--profile", "quick", "--fault", "mixed",
			"--postgres-port", strconv.Itoa(pg), "--redis-port", strconv.Itoa(rd))
		deadline := time.Now().Add(45 * time.Second)
		for p == nil {
			if listening(rd + 4) {
				p = q
				break
			}
			ended := false
			select {
			case <-q.Done():
				ended = true
			default:
			}
			if ended {
				r := q.wait(t)
				if try == 3 {
					t.Fatalf("the suite ended before it was interrupted, 3 times: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				t.Logf("the suite ended before it was interrupted (exit %d): again on other ports\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fifth node never listened\nstderr: %s", q.Stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second)
	p.signal(t, syscall.SIGINT)
	r := p.wait(t)
	if r.code != exitInterrupted {
		t.Errorf("exit %d after SIGINT, want %d\nstderr: %s", r.code, exitInterrupted, r.stderr)
	}
	// The suite waits for its servers before it exits; a listener that is
	// still there a moment later was left behind.
	for _, port := range []int{pg, rd, rd + 1, rd + 2, rd + 3, rd + 4} {
		gone := time.Now().Add(2 * time.Second)
		for listening(port) && time.Now().Before(gone) {
			time.Sleep(50 * time.Millisecond)
		}
		if listening(port) {
			t.Errorf("port %d still has a listener after the suite ended\nstderr: %s", port, r.stderr)
		}
	}
}

// freePortBlock finds n consecutive free ports (the suite gives node k of a
// run the port base+k).
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base := freeTCPPort(t)
		if base+n > 65535 {
			continue
		}
		ok := true
		for k := range n {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+k)))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

func listening(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
