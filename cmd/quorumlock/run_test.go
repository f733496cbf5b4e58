package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

func TestRunExitStatus(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	cases := []struct {
		name string
		cmd  []string
		code int
	}{
		{"success", []string{"true"}, 0},
		{"failure", []string{"sh", "-c", "exit 3"}, 3},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + int(syscall.SIGKILL)},
		{"output passes through", []string{"sh", "-c", "echo out; echo err >&2"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := testenv.Key(t)
			args := append([]string{"run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "5s", "--"}, tc.cmd...)
			r := runCLI(t, dir, nil, args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			if tc.name == "output passes through" && (r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n")) {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
			keyAbsent(t, nodes, key)
		})
	}
}

// TestRunNoOverlap runs several quorumlock processes on one key at once;
// each command logs its start and end with a timestamp. The intervals must
// not overlap, and every command must have run.
func TestRunNoOverlap(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	key := testenv.Key(t)
	const runs = 4
	script := `echo "B $$ $(date +%s%N)" >> log; sleep 0.3; echo "E $$ $(date +%s%N)" >> log`
	var ps []*proc
	for range runs {
		ps = append(ps, startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "50s", "--", "sh", "-c", script))
	}
	for _, p := range ps {
		if r := p.wait(t); r.code != 0 {
			t.Errorf("exit %d, stderr: %s", r.code, r.stderr)
		}
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*runs {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), 2*runs, b)
	}
	var lastEnd int64
	for i := 0; i < len(lines); i += 2 {
		b, e := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(b) != 3 || len(e) != 3 || b[0] != "B" || e[0] != "E" || b[1] != e[1] {
			t.Fatalf("sections interleave at line %d:\n%s", i+1, strings.Join(lines, "\n"))
		}
		start, _ := strconv.ParseInt(b[2], 10, 64)
		end, _ := strconv.ParseInt(e[2], 10, 64)
		if start < lastEnd || end < start {
			t.Errorf("section %d [%d, %d] overlaps the previous one ending %d", i/2, start, end, lastEnd)
		}
		lastEnd = end
	}
	keyAbsent(t, nodes, key)
}

// holdLock starts a run whose command holds the lock until the file
// "release" appears in dir; it returns once the command is running.
func holdLock(t *testing.T, nodes []*testenv.RedisNode, dir, key string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s"}, extra...)
	args = append(args, "--", "sh", "-c", `touch held; while [ ! -e release ]; do sleep 0.05; done`)
	p := startCLI(t, dir, nil, args...)
	waitFile(t, filepath.Join(dir, "held"), 30*time.Second)
	return p
}

func TestRunNotObtained(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	holder := holdLock(t, nodes, dir, key)

	r := runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "0", "--", "touch", "ran-0")
	if r.code != exitTempFail {
		t.Errorf("--wait 0: exit %d, want %d\nstderr: %s", r.code, exitTempFail, r.stderr)
	}
	for _, want := range []string{"not obtained", "--wait 0", "held by another owner"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--wait 0: stderr does not say %q: %s", want, r.stderr)
		}
	}

	r = runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "700ms", "--", "touch", "ran-1")
	if r.code != exitTempFail || !strings.Contains(r.stderr, "within --wait 700ms") {
		t.Errorf("--wait 700ms: exit %d, want %d\nstderr: %s", r.code, exitTempFail, r.stderr)
	}
	if r.elapsed < 700*time.Millisecond {
		t.Errorf("--wait 700ms gave up after %v", r.elapsed)
	}
	for _, f := range []string{"ran-0", "ran-1"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("the command of a run that did not get the lock ran (%s)", f)
		}
	}

	// A waiter without --wait gets the lock once the holder is done.
	waiter := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--", "touch", "ran-2")
	time.Sleep(300 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := holder.wait(t); r.code != 0 {
		t.Errorf("holder: exit %d, stderr: %s", r.code, r.stderr)
	}
	if r := waiter.wait(t); r.code != 0 {
		t.Errorf("waiter: exit %d, stderr: %s", r.code, r.stderr)
	}
	waitFile(t, filepath.Join(dir, "ran-2"), time.Second)
}

// TestRunInterruptedWhileWaiting: a signal before the lock was obtained
// ends the wait; the command never runs.
// A cron job skips a turn when someone else holds the lock (75) and must
// alert when nobody could take it (69). With the key held and three of
// five nodes down, run said 75 and "held by another owner": an outage
// read as a skip.
func TestRunTellsAnOutageFromAHeldKey(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	ctx := context.Background()
	for _, n := range nodes {
		if err := n.Client(t).Set(ctx, key, "another-owner", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	run := func() result {
		return runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "5s", "--wait", "0", "--", "touch", "ran")
	}

	if err := nodes[4].Kill(); err != nil {
		t.Fatal(err)
	}
	r := run()
	if r.code != exitTempFail || !strings.Contains(r.stderr, "held by another owner") {
		t.Errorf("held, one node down: exit %d, want %d (held)\nstderr: %s", r.code, exitTempFail, r.stderr)
	}

	for _, n := range nodes[2:4] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r = run()
	if r.code != exitUnavail {
		t.Errorf("held, three nodes down: exit %d, want %d (unavailable)\nstderr: %s", r.code, exitUnavail, r.stderr)
	}
	for _, want := range []string{"the lock service is unavailable", "3 of 5 nodes unreachable (connection refused)"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("three nodes down: stderr does not say %q: %s", want, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran without the lock")
	}
}

func TestRunInterruptedWhileWaiting(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	holdLock(t, nodes, dir, key)
	waiter := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--", "touch", "ran")
	time.Sleep(500 * time.Millisecond)
	waiter.signal(t, syscall.SIGTERM)
	r := waiter.wait(t)
	if r.code != 128+int(syscall.SIGTERM) || !strings.Contains(r.stderr, "while waiting") {
		t.Errorf("exit %d, want %d\nstderr: %s", r.code, 128+int(syscall.SIGTERM), r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran")
	}
	_ = os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
}

// TestRunLeaseLost deletes the lock key behind the holder's back: the next
// renewal finds it gone, the command gets SIGTERM, and quorumlock exits 124.
func TestRunLeaseLost(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	p := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "1500ms", "--",
		"sh", "-c", `trap 'echo TERM > got; exit 0' TERM; touch started; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
	ctx := context.Background()
	for _, n := range nodes {
		if err := n.Client(t).Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	r := p.wait(t)
	if r.code != exitLeaseLost {
		t.Errorf("exit %d, want %d\nstderr: %s", r.code, exitLeaseLost, r.stderr)
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not say the lease was lost: %s", r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || string(b) != "TERM\n" {
		t.Errorf("the command did not get SIGTERM: %q, %v", b, err)
	}
	// The next renewal is at most ttl/3 away; allow for a busy machine.
	if d := time.Since(deleted); d > 10*time.Second {
		t.Errorf("the loss took %v to stop the command", d)
	}
}

// TestRunQuorumLostKillsStubbornCommand kills 3 of 5 nodes: renewals fail
// until the validity runs out. The command ignores SIGTERM, so it must get
// SIGKILL after --grace, and nothing of its process group may survive: not
// even the "sleep 300" it started, which ignores SIGTERM too.
func TestRunQuorumLostKillsStubbornCommand(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	p := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "1s", "--grace", "500ms", "--",
		"sh", "-c", `trap '' TERM; sleep 300 & echo $$ > pid; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "pid"), 30*time.Second)
	for _, n := range nodes[:3] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := p.wait(t)
	if r.code != exitLeaseLost {
		t.Errorf("exit %d, want %d\nstderr: %s", r.code, exitLeaseLost, r.stderr)
	}
	if !strings.Contains(r.stderr, "SIGKILL") || !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not report the lost lease and the SIGKILL: %s", r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// Killed members may linger briefly as zombies until their new parent
	// reaps them; only a live member is a failure.
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := liveGroupMembers(t, pid)
		if len(live) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("process group %d still has live members %v after quorumlock exited", pid, live)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// liveGroupMembers lists the processes of group pgid that are not zombies.
func liveGroupMembers(t *testing.T, pgid int) []string {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return nil
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return []string{"(no /proc to tell zombies apart)"}
	}
	var live []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		live = append(live, s[:end+1]+" "+fields[0])
	}
	return live
}

func TestRunMaxHold(t *testing.T) {
	nodes := redisNodes(t, 5)
	key := testenv.Key(t)
	r := runCLI(t, "", nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "600ms", "--max-hold", "1s", "--", "sleep", "30")
	if r.code != exitLeaseLost || !strings.Contains(r.stderr, "--max-hold") {
		t.Errorf("exit %d, want %d\nstderr: %s", r.code, exitLeaseLost, r.stderr)
	}
	if r.elapsed < time.Second || r.elapsed > 20*time.Second {
		t.Errorf("ran %v, want a little over --max-hold 1s", r.elapsed)
	}
}

// TestRunForwardsSignals sends USR1, then TERM, to quorumlock; the command
// traps both. quorumlock exits with the command's status and releases.
func TestRunForwardsSignals(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	p := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--",
		"sh", "-c", `trap 'echo USR1 >> got' USR1; trap 'echo TERM >> got; exit 7' TERM; touch started; while :; do sleep 0.05; done`)
	waitFile(t, filepath.Join(dir, "started"), 30*time.Second)
	p.signal(t, syscall.SIGUSR1)
	waitFile(t, filepath.Join(dir, "got"), 10*time.Second)
	p.signal(t, syscall.SIGTERM)
	r := p.wait(t)
	if r.code != 7 {
		t.Errorf("exit %d, want the command's 7\nstderr: %s", r.code, r.stderr)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "got"))
	if string(b) != "USR1\nTERM\n" {
		t.Errorf("the command saw %q, want USR1 then TERM", b)
	}
	keyAbsent(t, nodes, key)
}

// TestRunFencingTokens: consecutive runs get increasing tokens; without
// --fence the command gets none, not even one inherited from outside.
func TestRunFencingTokens(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	var prev uint64
	for i := range 4 {
		r := runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--fence", "--",
			"sh", "-c", `echo "$QUORUMLOCK_FENCING_TOKEN"`)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d, stderr: %s", i, r.code, r.stderr)
		}
		tok, err := strconv.ParseUint(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil || tok == 0 {
			t.Fatalf("run %d: token %q: %v", i, r.stdout, err)
		}
		if tok <= prev {
			t.Errorf("run %d: token %d does not exceed the previous %d", i, tok, prev)
		}
		prev = tok
	}
	r := runCLI(t, dir, []string{"QUORUMLOCK_FENCING_TOKEN=99999999999999999"}, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--",
		"sh", "-c", `echo "${QUORUMLOCK_FENCING_TOKEN-unset}"`)
	if r.code != 0 || r.stdout != "unset\n" {
		t.Errorf("without --fence: exit %d, the command saw token %q", r.code, r.stdout)
	}
}

// TestRunWithPassword runs against nodes that require a password, given
// through the environment and through a file; the command must not see it.
func TestRunWithPassword(t *testing.T) {
	const secret = "quorumlock-test-pw-6d1f"
	nodes := redisNodes(t, 5)
	setPassword(t, nodes, secret)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := testenv.Key(t)
	r := runCLI(t, dir, []string{"QUORUMLOCK_PASSWORD=" + secret, "QUORUMLOCK_NODES=" + nodesArg(nodes)},
		"run", "--key", key, "--ttl", "2s", "--", "sh", "-c", `echo "${QUORUMLOCK_PASSWORD-unset}"`)
	if r.code != 0 || r.stdout != "unset\n" {
		t.Errorf("env password: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, dir, []string{"QUORUMLOCK_PASSWORD_FILE=" + pwFile}, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--", "true")
	if r.code != 0 {
		t.Errorf("password file: exit %d, stderr %s", r.code, r.stderr)
	}
	r = runCLI(t, dir, []string{"QUORUMLOCK_PASSWORD=wrong-" + secret}, "run", "-v", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "0", "--", "true")
	if r.code == 0 {
		t.Errorf("wrong password: exit 0")
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("password printed: %s", r.stderr)
	}
}

// From a review: on a new deployment run printed nothing for a whole
// quarantine, then ran the command. It says why at once, once, with the
// time left; and --wait 0 points to waiting, not to a bootstrap that the
// first attempt has already made useless.
func TestRunSaysAtOnceThatTheNodesAreInQuarantine(t *testing.T) {
	nodes := emptyRedisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	const notice = "locks are refused for about"

	r := runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--max-ttl", "4s", "--key", key, "--ttl", "1s", "--wait", "0", "--", "touch", "ran-0")
	if r.code != exitUnavail {
		t.Fatalf("--wait 0 on new nodes: exit %d, want %d (the service cannot grant, nobody holds the key)\nstderr: %s", r.code, exitUnavail, r.stderr)
	}
	for _, want := range []string{"in restart quarantine", "the nodes admit themselves when the first quarantine ends, in about", "bootstrap admits only a deployment nobody has used yet"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("--wait 0 on new nodes: stderr does not say %q: %s", want, r.stderr)
		}
	}
	t.Logf("--wait 0 on new nodes: %s", r.stderr)
	if strings.Contains(r.stderr, notice) {
		t.Errorf("--wait 0 printed the waiting notice as well as its error: %s", r.stderr)
	}

	p := startCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--max-ttl", "4s", "--key", key, "--ttl", "1s", "--", "touch", "ran-1")
	var seen time.Duration
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(p.Stderr.String(), notice) {
			seen = time.Since(p.Started)
			break
		}
	}
	if seen == 0 {
		t.Fatalf("no notice on stderr while waiting out the quarantine: %s", p.Stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "ran-1")); err == nil {
		t.Fatalf("the notice came only after the command ran")
	}
	// The quarantine is about 4s (the first run started it): the notice
	// must come at the start of the wait, within a second, not at its end.
	if seen > time.Second {
		t.Errorf("the notice came %v after the start", seen)
	}
	t.Logf("notice on stderr %v after the start", seen)
	r = p.wait(t)
	if r.code != 0 {
		t.Fatalf("exit %d after the quarantine, stderr: %s", r.code, r.stderr)
	}
	waitFile(t, filepath.Join(dir, "ran-1"), time.Second)
	t.Logf("waiting run: %s", r.stderr)
	if n := strings.Count(r.stderr, notice); n != 1 {
		t.Errorf("the notice was printed %d times, want once: %s", n, r.stderr)
	}
}

// One node of five that refuses the credentials (a password rotation
// half done) leaves four that grant: run goes on, with one warning line,
// and a key held elsewhere is still "held" (75), not a configuration
// error. Three refusing leave no majority: exit 125, naming a node. It
// used to exit 125 on the first.
func TestRunRefusedCredentials(t *testing.T) {
	nodes := redisNodes(t, 5)
	dir := t.TempDir()
	key := testenv.Key(t)
	run := func() result {
		return runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "0", "--", "touch", "ran")
	}

	setPassword(t, nodes[4:], "quorumlock-refused-pw")
	r := run()
	if r.code != 0 {
		t.Fatalf("1 node refusing: exit %d, want 0\nstderr: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("1 node refusing: the command did not run: %v", err)
	}
	if got := strings.Count(r.stderr, "warning: "); got != 1 || !strings.Contains(r.stderr, "refused this client") || !strings.Contains(r.stderr, "NOAUTH") || !strings.Contains(r.stderr, nodes[4].Addr()) {
		t.Errorf("1 node refusing: want one warning naming the node and its reply, got %d:\n%s", got, r.stderr)
	}
	ctx := context.Background()
	for _, n := range nodes[:4] {
		if err := n.Client(t).Set(ctx, key, "another-owner", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if r := run(); r.code != exitTempFail || !strings.Contains(r.stderr, "held by another owner") {
		t.Errorf("1 node refusing, key held elsewhere: exit %d, want %d (held)\nstderr: %s", r.code, exitTempFail, r.stderr)
	}
	for _, n := range nodes[:4] {
		if err := n.Client(t).Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "ran")); err != nil {
		t.Fatal(err)
	}

	refusing := nodes[2:]
	setPassword(t, nodes[2:4], "quorumlock-refused-pw")
	r = run()
	if r.code != exitRunFailed {
		t.Errorf("3 nodes refusing: exit %d, want %d\nstderr: %s", r.code, exitRunFailed, r.stderr)
	}
	for _, want := range []string{"NOAUTH", "refused this client", "3 of 5 nodes refuse"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("3 nodes refusing: stderr does not say %q: %s", want, r.stderr)
		}
	}
	if !slices.ContainsFunc(refusing, func(n *testenv.RedisNode) bool { return strings.Contains(r.stderr, "("+n.Addr()+")") }) {
		t.Errorf("3 nodes refusing: stderr names none of them as host:port: %s", r.stderr)
	}
	if strings.Contains(r.stderr, "tcp://") {
		t.Errorf("a node spelled with tcp://: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the command ran with 3 nodes refusing")
	}
}

// A node that takes RDB snapshots, or keeps an AOF it does not sync on
// every write, can come back from a restart admitted but without its
// last locks: run says so on stderr, one line per node and setting, and
// goes ahead; so does a run that finds the key held (exit 75). A node
// that refuses CONFIG GET draws no line (check says why).
func TestRunWarnsOfUnsafePersistence(t *testing.T) {
	nodes := redisNodes(t, 5)
	ctx := context.Background()
	if err := nodes[1].Client(t).ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"appendonly": "yes", "appendfsync": "everysec"} {
		if err := nodes[3].Client(t).ConfigSet(ctx, k, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Node 4 refuses CONFIG to everyone.
	if err := nodes[4].Client(t).Do(ctx, "ACL", "SETUSER", "default", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[4].Client(t).ConfigSet(ctx, "save", "60 1").Err(); err == nil {
		t.Fatal("node 4 still runs CONFIG SET")
	}
	dir := t.TempDir()
	key := testenv.Key(t)
	check := func(what string, r result, code int) {
		t.Helper()
		if r.code != code {
			t.Fatalf("%s: exit %d, want %d\nstderr: %s", what, r.code, code, r.stderr)
		}
		if n := strings.Count(r.stderr, "warning: "); n != 2 {
			t.Errorf("%s: %d warnings, want 2:\n%s", what, n, r.stderr)
		}
		for _, want := range []string{
			`warning: node takes RDB snapshots (save "3600 1")`,
			"node=1 addr=" + nodes[1].Addr(),
			"warning: node keeps an AOF with appendfsync everysec",
			"node=3 addr=" + nodes[3].Addr(),
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr does not say %q:\n%s", what, want, r.stderr)
			}
		}
	}
	r := runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--", "touch", "ran")
	check("free key", r, 0)
	t.Logf("stderr: %s", r.stderr)
	if _, err := os.Stat(filepath.Join(dir, "ran")); err != nil {
		t.Errorf("the command did not run: %v", err)
	}
	for _, n := range nodes {
		if err := n.Client(t).Set(ctx, key, "another-owner", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	r = runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--wait", "0", "--", "true")
	check("held key", r, exitTempFail)

	// A node that is down: its read goes on while go-redis retries the
	// dial, and run goes ahead once the others answered, with both lines
	// and the startup probe's own warning for the down node.
	for _, n := range nodes {
		if err := n.Client(t).Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes[0].Kill(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", key, "--ttl", "2s", "--", "true")
	if r.code != 0 {
		t.Fatalf("node 0 down: exit %d, want 0\nstderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{`warning: node takes RDB snapshots (save "3600 1")`, "warning: node keeps an AOF with appendfsync everysec", "node=0 addr=" + nodes[0].Addr()} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("node 0 down: stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}

// An even number of nodes is worth a warning: 4 tolerate one failed node,
// as 3 do. The run itself goes ahead.
func TestRunWarnsOfAnEvenNodeCount(t *testing.T) {
	nodes := redisNodes(t, 4)
	r := runCLI(t, "", nil, "run", "--nodes", nodesArg(nodes), "--key", testenv.Key(t), "--ttl", "2s", "--", "true")
	if r.code != 0 || !strings.Contains(r.stderr, "warning: 4 nodes tolerate 1 failed node(s), as 3 would") {
		t.Errorf("4 nodes: exit %d, stderr: %s", r.code, r.stderr)
	}
	r = runCLI(t, "", nil, "run", "--nodes", nodesArg(nodes[:3]), "--key", testenv.Key(t), "--ttl", "2s", "--", "true")
	if strings.Contains(r.stderr, "warning") {
		t.Errorf("3 nodes: stderr: %s", r.stderr)
	}
}

// A run that waits while fewer than a majority of nodes answer says so
// once, at the start of the wait: cron's log then shows an outage, not a
// holder, long before --wait ends (exit 69).
func TestRunSaysOnceThatItWaitsForTheLockService(t *testing.T) {
	nodes := redisNodes(t, 3)
	for _, n := range nodes[1:] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	r := runCLI(t, dir, nil, "run", "--nodes", nodesArg(nodes), "--key", testenv.Key(t), "--ttl", "2s", "--wait", "2s", "--", "touch", "ran")
	if r.code != exitUnavail {
		t.Errorf("two of three nodes down: exit %d, want %d\nstderr: %s", r.code, exitUnavail, r.stderr)
	}
	const said = "quorumlock run: the lock service cannot grant the lock now (no quorum: 2 of 3 nodes unreachable"
	if n := strings.Count(r.stderr, said); n != 1 {
		t.Errorf("the notice %q appears %d times, want once; stderr: %s", said, n, r.stderr)
	}
	if !strings.Contains(r.stderr, "waiting until a majority of nodes answers or --wait 2s ends (then exit 69)") {
		t.Errorf("the notice does not say how long it waits: %s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran without the lock")
	}
}
