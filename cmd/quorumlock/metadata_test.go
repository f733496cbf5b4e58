//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock"
)

// "run" stores who holds the lock (host, pid, command) with it, or what
// --metadata says, and "status" shows it. (From the newcomer review:
// status showed only a random value.)
func TestRunStoresWhoHoldsTheLock(t *testing.T) {
	nodes := redisNodes(t, 5)
	arg := nodesArg(nodes)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"by default", nil, []string{"host=" + host + " pid=", ` cmd="sh -c touch held; while`}},
		{"--metadata", []string{"--metadata", "job=nightly-report owner=ops"}, []string{"job=nightly-report owner=ops"}},
		{"--metadata ''", []string{"--metadata", ""}, nil}, // none at all
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			key := testenv.Key(t)
			holder := holdLock(t, nodes, dir, key, tc.extra...)
			rep, _ := statusJSON(t, nil, "--nodes", arg, "--key", key)
			if rep.Verdict != verdictHeld {
				t.Fatalf("verdict %q", rep.Verdict)
			}
			for _, w := range tc.want {
				if !strings.Contains(rep.HolderMetadata, w) {
					t.Errorf("holder_metadata %q does not contain %q", rep.HolderMetadata, w)
				}
			}
			if tc.want == nil && rep.HolderMetadata != "" {
				t.Errorf("holder_metadata %q, want none", rep.HolderMetadata)
			}
			r := runCLI(t, "", nil, "status", "--nodes", arg, "--key", key)
			if tc.want != nil && !strings.Contains(r.stdout, "holder: "+rep.HolderMetadata+"\n") {
				t.Errorf("status does not show the holder's metadata:\n%s", r.stdout)
			}
			if tc.want == nil && strings.Contains(r.stdout, "holder:") {
				t.Errorf("status shows a holder's metadata where none was stored:\n%s", r.stdout)
			}
			if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if r := holder.wait(t); r.code != 0 {
				t.Fatalf("holder: exit %d, stderr: %s", r.code, r.stderr)
			}
			rep, _ = statusJSON(t, nil, "--nodes", arg, "--key", key)
			if rep.HolderMetadata != "" {
				t.Errorf("metadata %q shown after the release", rep.HolderMetadata)
			}
		})
	}

	// Too long: a usage error before any node is touched.
	key := testenv.Key(t)
	long := strings.Repeat("x", redlock.MaxMetadata+1)
	r := runCLI(t, t.TempDir(), nil, "run", "--nodes", arg, "--key", key, "--ttl", "2s", "--metadata", long, "--", "touch", "ran")
	if r.code != exitUsage || !strings.Contains(r.stderr, fmt.Sprintf("at most %d", redlock.MaxMetadata)) {
		t.Errorf("--metadata of %d bytes: exit %d, stderr: %s", len(long), r.code, r.stderr)
	}
	keyAbsent(t, nodes, key)
}

// The default metadata fits the bound, however long the command.
func TestRunDefaultMetadataFits(t *testing.T) {
	rc := &runConfig{command: []string{"sh", "-c", strings.Repeat("é", 3*redlock.MaxMetadata)}}
	md := rc.holderMetadata()
	if len(md) > redlock.MaxMetadata || !strings.Contains(md, "pid=") || !strings.Contains(md, `cmd="sh -c é`) {
		t.Errorf("default metadata of %d bytes: %.80q...", len(md), md)
	}
}
