package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInput checks that every input error exits 2 with a message naming
// the problem, and contacts no node: the only node given is a listener
// that counts connections.
func TestBadInput(t *testing.T) {
	trap := newTrap(t)
	node := trap.addr()
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string // in stderr
		code int
	}{
		{"no arguments", nil, nil, "Usage:", exitUsage},
		{"unknown command", nil, []string{"frobnicate"}, `unknown command "frobnicate"`, exitUsage},
		{"chaos moved out", nil, []string{"chaos", "--profile", "smoke"}, "program of its own now: quorumlock-chaos", exitUsage},
		{"bench moved out", nil, []string{"bench", "--quick"}, "program of its own now: quorumlock-bench", exitUsage},
		{"run without nodes", nil, []string{"run", "--key", "k", "--ttl", "1s", "--", "true"}, "no nodes", exitUsage},
		{"run with empty nodes env", []string{"QUORUMLOCK_NODES= , "}, []string{"run", "--key", "k", "--ttl", "1s", "--", "true"}, "no nodes", exitUsage},
		{"run without key", nil, []string{"run", "--nodes", node, "--ttl", "1s", "--", "true"}, "--key is required", exitUsage},
		{"run with empty key", nil, []string{"run", "--nodes", node, "--key", "", "--ttl", "1s", "--", "true"}, "--key is required", exitUsage},
		{"run with a key of quorumlock's own", nil, []string{"run", "--nodes", node, "--key", "quorumlock:x", "--ttl", "1s", "--", "true"}, "quorumlock's own namespace", exitUsage},
		{"status with a key of quorumlock's own", nil, []string{"status", "--nodes", node, "--key", "quorumlock:x"}, "quorumlock's own namespace", exitUsage},
		{"run without ttl", nil, []string{"run", "--nodes", node, "--key", "k", "--", "true"}, "--ttl is required", exitUsage},
		{"run with bad ttl", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "banana", "--", "true"}, "not a duration", exitUsage},
		{"run with negative ttl", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "-1s", "--", "true"}, "must not be negative", exitUsage},
		{"run with sub-millisecond ttl", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1500us", "--", "true"}, "whole number of milliseconds", exitUsage},
		{"run with ttl below drift", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "2ms", "--", "true"}, "drift", exitUsage},
		{"run with ttl above max ttl", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "2m", "--", "true"}, "exceeds the client's max ttl", exitUsage},
		{"run with bad max ttl env", []string{"QUORUMLOCK_MAX_TTL=soon"}, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--", "true"}, "QUORUMLOCK_MAX_TTL", exitUsage},
		{"run with negative wait", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--wait", "-1s", "--", "true"}, "must not be negative", exitUsage},
		{"run with zero max hold", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--max-hold", "0s", "--", "true"}, "--max-hold must be positive", exitUsage},
		{"run without command", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s"}, "missing command", exitUsage},
		{"run without command after dashes", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--"}, "missing command", exitUsage},
		{"run with unknown flag", nil, []string{"run", "--nodes", node, "--color", "--key", "k", "--ttl", "1s", "--", "true"}, "flag provided but not defined", exitUsage},
		{"run with bad node", nil, []string{"run", "--nodes", node + ",nonsense", "--key", "k", "--ttl", "1s", "--", "true"}, "node 1 (nonsense)", exitUsage},
		{"run with bad port", nil, []string{"run", "--nodes", "127.0.0.1:99999", "--key", "k", "--ttl", "1s", "--", "true"}, "invalid port", exitUsage},
		{"run with duplicate node", nil, []string{"run", "--nodes", node + "," + node, "--key", "k", "--ttl", "1s", "--", "true"}, "same address", exitUsage},
		{"run with localhost duplicate", nil, []string{"run", "--nodes", node + "," + strings.Replace(node, "127.0.0.1", "localhost", 1), "--key", "k", "--ttl", "1s", "--", "true"}, "same address", exitUsage},
		{"run with bad scheme", nil, []string{"run", "--nodes", "http://" + node, "--key", "k", "--ttl", "1s", "--", "true"}, "unknown scheme", exitUsage},
		{"run with bad bool env", []string{"QUORUMLOCK_TLS=maybe"}, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--", "true"}, "QUORUMLOCK_TLS", exitUsage},
		{"run with cert but no key", nil, []string{"run", "--nodes", node, "--tls-cert", notExec, "--key", "k", "--ttl", "1s", "--", "true"}, "give both or neither", exitUsage},
		{"run with missing CA file", nil, []string{"run", "--nodes", node, "--tls-ca", filepath.Join(dir, "nope.pem"), "--key", "k", "--ttl", "1s", "--", "true"}, "--tls-ca", exitUsage},
		{"run with empty password file", nil, []string{"run", "--nodes", node, "--password-file", notExec + "-empty", "--key", "k", "--ttl", "1s", "--", "true"}, "password file", exitUsage},
		{"run with two password sources", []string{"QUORUMLOCK_PASSWORD=x"}, []string{"run", "--nodes", node, "--password-file", notExec, "--key", "k", "--ttl", "1s", "--", "true"}, "give one", exitUsage},
		{"run of a missing command", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--", "no-such-command-quorumlock-test"}, "not found", exitNotFound},
		{"run of a non-executable file", nil, []string{"run", "--nodes", node, "--key", "k", "--ttl", "1s", "--", notExec}, "permission denied", exitCannotExec},
		{"status without key", nil, []string{"status", "--nodes", node}, "--key is required", exitUsage},
		{"status without nodes", nil, []string{"status", "--key", "k"}, "no nodes", exitUsage},
		{"status with argument", nil, []string{"status", "--nodes", node, "--key", "k", "extra"}, `unexpected argument "extra"`, exitUsage},
		{"status with zero timeout", nil, []string{"status", "--nodes", node, "--key", "k", "--timeout", "0s"}, "--timeout must be positive", exitUsage},
	}
	if err := os.WriteFile(notExec+"-empty", []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, dir, tc.env, tc.args...)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr does not mention %q:\n%s", tc.want, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout not empty: %q", r.stdout)
			}
		})
	}
	if n := trap.count(); n != 0 {
		t.Errorf("bad input opened %d connection(s) to the node", n)
	}
}

// TestPasswordsNeverPrinted feeds passwords through every channel into
// failing commands and checks that no output contains them.
func TestPasswordsNeverPrinted(t *testing.T) {
	trap := newTrap(t)
	const secret = "hunter2-quorumlock-secret"
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
	}{
		{"bad port in URL", nil, []string{"status", "--nodes", "redis://user:" + secret + "@127.0.0.1:notaport", "--key", "k"}},
		{"bad db in URL", nil, []string{"run", "--nodes", "redis://user:" + secret + "@127.0.0.1:1/x", "--key", "k", "--ttl", "1s", "--", "true"}},
		{"URL in env, bad ttl", []string{"QUORUMLOCK_NODES=redis://:" + secret + "@" + trap.addr()}, []string{"run", "--key", "k", "--ttl", "0s", "--", "true"}},
		{"env password, unreachable nodes", []string{"QUORUMLOCK_PASSWORD=" + secret}, []string{"status", "--nodes", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--key", "k", "--timeout", "2s"}},
		{"file password, JSON", nil, []string{"status", "--nodes", "127.0.0.1:1", "--password-file", pwFile, "--key", "k", "--json"}},
		{"env password, run fails", []string{"QUORUMLOCK_PASSWORD=" + secret}, []string{"run", "-v", "--nodes", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "--key", "k", "--ttl", "1s", "--wait", "0", "--", "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, "", tc.env, tc.args...)
			if r.code == 0 && !strings.Contains(tc.name, "JSON") && !strings.Contains(tc.name, "unreachable") {
				t.Errorf("exit 0, want a failure")
			}
			if strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("password printed:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
			}
			if r.stdout+r.stderr == "" {
				t.Errorf("no output at all")
			}
		})
	}
}

func TestHelp(t *testing.T) {
	r := runCLI(t, "", nil, "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "run ") || !strings.Contains(r.stdout, "status ") {
		t.Errorf("quorumlock --help: exit %d, stdout:\n%s", r.code, r.stdout)
	}
	r = runCLI(t, "", nil, "run", "--help")
	if r.code != 0 {
		t.Errorf("run --help: exit %d", r.code)
	}
	for _, want := range []string{"75", "124", "127", "128+N", "--fence", "QUORUMLOCK_NODES", "QUORUMLOCK_FENCING_TOKEN", "--max-hold", "--tls-ca"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("run --help does not mention %s", want)
		}
	}
	for _, arg := range []string{"--version", "version"} {
		r = runCLI(t, "", nil, arg)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "quorumlock ") || !strings.Contains(r.stdout, "go1.") {
			t.Errorf("quorumlock %s: exit %d, stdout %q, stderr %q", arg, r.code, r.stdout, r.stderr)
		}
	}
	r = runCLI(t, "", nil, "help", "status")
	if r.code != 0 || !strings.Contains(r.stdout, "--json") || !strings.Contains(r.stdout, "Exit codes") {
		t.Errorf("help status: exit %d, stdout:\n%s", r.code, r.stdout)
	}
}
