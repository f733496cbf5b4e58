package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// The password never shows in what the CLI prints, however it was given
// (node URL, QUORUMLOCK_PASSWORD, --password-file), on success, with -v,
// on every error path and in status --json; and masking it leaves the
// messages readable. A distinctive password must appear nowhere; a
// common one ("e", "redis") appears in ordinary words, so for it the test
// checks the places a credential is echoed (a URL's user information, a
// password= setting) and that nothing else was masked. From the issue:
// with the password "e", every message read "rxxxxxdlock".
func TestSecrets_NoOutputShowsThePasswordAndMessagesStayReadable(t *testing.T) {
	for name, pw := range map[string]string{"distinctive": "Quorumlock-Distinctive-Pw-7f3a", "e": "e", "redis": "redis"} {
		t.Run(name, func(t *testing.T) {
			nodes := redisNodes(t, 5)
			requirePassword(t, nodes, pw)
			dir := t.TempDir()
			pwFile := filepath.Join(dir, "pw")
			if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			urls := func(pass string) string {
				us := make([]string, len(nodes))
				for i, n := range nodes {
					us[i] = "redis://:" + pass + "@" + n.Addr()
				}
				return strings.Join(us, ",")
			}
			plain, good, wrong := nodesArg(nodes), urls(pw), urls(pw+"-wrong")
			dsn := "postgres://app:" + pw + "@db.invalid/app"
			key := testenv.Key(t)

			cases := []struct {
				name string
				env  []string
				args []string
				code int
				want []string // in the output, as the CLI writes them
			}{
				{"run -v with URL passwords", nil,
					[]string{"run", "-v", "--nodes", good, "--key", key, "--ttl", "2s", "--", "true"}, exitOK, []string{"level=DEBUG"}},
				{"run with QUORUMLOCK_PASSWORD", []string{"QUORUMLOCK_PASSWORD=" + pw},
					[]string{"run", "--nodes", plain, "--key", key, "--ttl", "2s", "--", "true"}, exitOK, nil},
				{"run with --password-file", nil,
					[]string{"run", "--nodes", plain, "--password-file", pwFile, "--key", key, "--ttl", "2s", "--", "true"}, exitOK, nil},
				{"run refused: wrong password in URLs", nil,
					[]string{"run", "-v", "--nodes", wrong, "--key", key, "--ttl", "2s", "--", "true"}, exitRunFailed,
					[]string{"quorumlock run: redlock: New: node", "refused this client (wrong password or ACL user): WRONGPASS"}},
				{"run refused: no password", nil,
					[]string{"run", "--nodes", plain, "--key", key, "--ttl", "2s", "--", "true"}, exitRunFailed,
					[]string{"refused this client (the node requires a password): NOAUTH"}},
				{"run: bad URL", nil,
					[]string{"run", "--nodes", "redis://:" + pw + "@127.0.0.1:notaport", "--key", key, "--ttl", "2s", "--", "true"}, exitUsage,
					[]string{"node 0 (redis://:xxxxx@127.0.0.1:notaport)"}},
				{"run: missing command with a DSN", nil,
					[]string{"run", "--nodes", good, "--key", key, "--ttl", "2s", "--", "no-such-command-quorumlock-test", dsn}, exitNotFound,
					[]string{"quorumlock run: exec:"}},
				{"status --json", nil,
					[]string{"status", "--json", "--nodes", good, "--key", key}, exitOK, []string{`"verdict": "free"`}},
				{"status --json refused", []string{"QUORUMLOCK_PASSWORD=" + pw + "-wrong"},
					[]string{"status", "--json", "--nodes", plain, "--key", key}, exitUnknown,
					[]string{`"error": "refused this client (wrong password or ACL user): WRONGPASS`}},
				{"status refused", nil,
					[]string{"status", "--nodes", wrong, "--key", key}, exitUnknown, []string{"refused", "verdict: UNKNOWN"}},
				{"status: unexpected argument", nil,
					[]string{"status", "--nodes", good, "--key", key, dsn}, exitUsage,
					[]string{`unexpected argument "postgres://app:xxxxx@db.invalid/app"`}},
				{"bootstrap refused", nil,
					[]string{"bootstrap", "--nodes", wrong}, exitFailure, []string{"quorumlock bootstrap: redlock: New: node", "WRONGPASS"}},
				{"reconfigure: bad old URL", nil,
					[]string{"reconfigure", "--from-nodes", "redis://:" + pw + "@127.0.0.1:x", "--nodes", good}, exitUsage,
					[]string{"--from-nodes: node 0 (redis://:xxxxx@127.0.0.1:x)"}},
				{"reconfigure refused", nil,
					[]string{"reconfigure", "--from-nodes", wrong, "--nodes", good, "--timeout", "2s"}, exitFailure, []string{"old node: refused this client (wrong password or ACL user): WRONGPASS", "fix it before running reconfigure again"}},
			}
			for _, tc := range cases {
				r := runCLI(t, dir, tc.env, tc.args...)
				if r.code != tc.code {
					t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", tc.name, r.code, tc.code, r.stdout, r.stderr)
				}
				requireNoSecret(t, tc.name, pw, r.stdout+r.stderr)
				for _, w := range tc.want {
					if !strings.Contains(r.stdout+r.stderr, w) {
						t.Errorf("%s: output does not say %q:\n%s%s", tc.name, w, r.stdout, r.stderr)
					}
				}
			}

			// A command line with a DSN is stored with the lock for status
			// to show: its password is masked before it reaches the nodes.
			p := startCLI(t, dir, nil, "run", "--nodes", good, "--key", key, "--ttl", "2s", "--",
				"sh", "-c", `touch held; while [ ! -e release ]; do sleep 0.05; done`, dsn, "PGPASSWORD="+pw)
			waitFile(t, filepath.Join(dir, "held"), 30*time.Second)
			for _, args := range [][]string{{"--json"}, nil} {
				r := runCLI(t, dir, nil, append([]string{"status", "--nodes", good, "--key", key}, args...)...)
				if r.code != exitHeld || !strings.Contains(r.stdout, "postgres://app:xxxxx@db.invalid/app PGPASSWORD=xxxxx") {
					t.Errorf("status %v of a held lock: exit %d, the holder's command line is not shown masked:\n%s%s", args, r.code, r.stdout, r.stderr)
				}
				requireNoSecret(t, "status of a held lock", pw, r.stdout+r.stderr)
			}
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			r := p.wait(t)
			if r.code != 0 {
				t.Errorf("holding run: exit %d: %s", r.code, r.stderr)
			}
			requireNoSecret(t, "holding run", pw, r.stdout+r.stderr)
		})
	}
}

// requireNoSecret fails the test if out shows pw where a credential is
// echoed, or anywhere when pw is distinctive, or masks anything else.
func requireNoSecret(t *testing.T, what, pw, out string) {
	t.Helper()
	if len(pw) > 8 && strings.Contains(strings.ToLower(out), strings.ToLower(pw)) {
		t.Errorf("%s: the password is printed:\n%s", what, out)
	}
	for _, echo := range []string{":" + pw + "@", "PASSWORD=" + pw, "password=" + pw} {
		if strings.Contains(out, echo) {
			t.Errorf("%s: the password is printed as %q:\n%s", what, echo, out)
		}
	}
	rest := strings.NewReplacer(":xxxxx@", "", "=xxxxx", "").Replace(out)
	if strings.Contains(rest, "xxxxx") {
		t.Errorf("%s: text other than a credential was masked (the password %q garbles messages):\n%s", what, pw, out)
	}
	if strings.Contains(out, "quorumlock") && !strings.Contains(out, "redlock") && strings.Contains(out, "New:") {
		t.Errorf("%s: %q garbled the library's name:\n%s", what, pw, out)
	}
}

// requirePassword makes every node require pw from now on.
func requirePassword(t *testing.T, nodes []*testenv.RedisNode, pw string) {
	t.Helper()
	for _, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr()})
		err := c.ConfigSet(context.Background(), "requirepass", pw).Err()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
