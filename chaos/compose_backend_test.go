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
	if backend, err := testenv.SelectedBackend(); err != nil || backend != testenv.BackendDocker {
		t.Skipf("containers: run with %s=%s", testenv.BackendEnv, testenv.BackendDocker)
	}
	if testing.Short() {
		t.Skip("starts dozens of containers")
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
			t.Errorf("%s/%s/%s (seed %d): %s", r.Topology, r.Fault, r.Fencing, r.Seed, strings.Join(r.Failure, "; "))
		}
	}
}
