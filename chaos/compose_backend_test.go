package chaos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/quorumlock/chaos"
	"github.com/quorumlock/quorumlock/internal/testenv"
)

// TestChaosComposeBackend runs a short profile with every server in a
// container and checks the verdicts the local backend's smoke checks.
func TestChaosComposeBackend(t *testing.T) {
	b := composeBackend(t, "starts dozens of containers")
	p, err := chaos.LookupProfile("smoke")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, p, 42, chaos.Options{Backend: b, WorkerCommand: workerCommand, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backend != "compose" {
		t.Errorf("report backend %q, want compose", rep.Backend)
	}
	if len(rep.Runs) != len(p.Runs) {
		t.Fatalf("%d runs reported, %d scheduled", len(rep.Runs), len(p.Runs))
	}
	for _, r := range rep.Runs {
		if !r.Pass {
			failedRun(t, r)
		}
	}
}

// TestChaosComposeConsensus runs etcd-3 and zk-3 with every member in a
// container (the images `make images` builds) under the faults that act on
// the members: one killed, two killed, one cut off from its peers.
func TestChaosComposeConsensus(t *testing.T) {
	b := composeBackend(t, "starts etcd and ZooKeeper containers")
	quick, err := chaos.LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	p, err := quick.Filter([]string{chaos.Etcd3, chaos.ZK3}, []string{"kill-1", "kill-2", "partition-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := chaos.Run(ctx, p, 31, chaos.Options{Backend: b, WorkerCommand: workerCommand, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Backend != "compose" || len(rep.Runs) != 6 {
		t.Fatalf("backend %q, %d runs; want compose, 6", rep.Backend, len(rep.Runs))
	}
	for _, r := range rep.Runs {
		if !r.Pass {
			failedRun(t, r)
		}
		switch r.Fault {
		case "kill-2":
			if r.Sections != 0 || !strings.Contains(r.Error, "no quorum") {
				t.Errorf("%s kill-2: %d sections, error %q; want none and a no-quorum error", r.Topology, r.Sections, r.Error)
			}
		case "partition-1":
			if r.Overlaps != 0 || r.DuringFault == 0 || r.BlockedMs <= 0 {
				t.Errorf("%s partition-1: overlaps %d, granted during the cut %d, majority again after %d ms; want 0, > 0, > 0",
					r.Topology, r.Overlaps, r.DuringFault, r.BlockedMs)
			}
		}
	}
}

// composeBackend returns a compose backend closed with the test, or
// skips unless the tests are asked to use containers, or in -short mode
// (saying what the test would start).
func composeBackend(t *testing.T, starts string) *chaos.ComposeBackend {
	t.Helper()
	if backend, err := testenv.SelectedBackend(); err != nil || backend != testenv.BackendDocker {
		t.Skipf("containers: run with %s=%s", testenv.BackendEnv, testenv.BackendDocker)
	}
	if testing.Short() {
		t.Skip(starts)
	}
	b, err := chaos.NewComposeBackend()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close backend: %v", err)
		}
	})
	return b
}
