package chaos

import (
	"bytes"
	"strings"
	"testing"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// TestWorkerProtocol: what a worker writes, the coordinator reads back as
// the same typed message, and anything else is ignored.
func TestWorkerProtocol(t *testing.T) {
	var b bytes.Buffer
	writeGate(&b, gateEvent{gate: gateRead, attempt: 3, token: 41, deadline: 123456789})
	writeDone(&b, 7)
	writeStats(&b, workerStats{Accepted: 7, Rejected: 2, Polls: 5, LastError: "no quorum"})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), b.String())
	}
	m, ok := parseMessage(lines[0])
	if !ok || m.gate == nil || *m.gate != (gateEvent{gate: gateRead, attempt: 3, token: 41, deadline: 123456789}) {
		t.Errorf("gate line %q parsed as %+v, %v", lines[0], m, ok)
	}
	m, ok = parseMessage(lines[1])
	if !ok || m.done == nil || *m.done != 7 {
		t.Errorf("done line %q parsed as %+v, %v", lines[1], m, ok)
	}
	m, ok = parseMessage(lines[2])
	if !ok || m.stats == nil || *m.stats != (workerStats{Accepted: 7, Rejected: 2, Polls: 5, LastError: "no quorum"}) {
		t.Errorf("stats line %q parsed as %+v, %v", lines[2], m, ok)
	}
	for _, junk := range []string{"", "hello", "gate read x 1", "gate read 1 2", "done many", "stats {", "gate"} {
		if m, ok := parseMessage(junk); ok {
			t.Errorf("%q parsed as %+v, want it ignored", junk, m)
		}
	}
}

// TestOutcome: the outcomes a worker records survive the history's text
// form as check's; the worker-internal ones and unknown text do not parse.
func TestOutcome(t *testing.T) {
	for o, want := range map[attemptOutcome]check.Outcome{outcomeOK: check.OutcomeOK, outcomeRejected: check.OutcomeRejected, outcomeError: check.OutcomeError} {
		got, err := check.ParseOutcome(o.String())
		if err != nil || got != want {
			t.Errorf("check.ParseOutcome(%q) = %v, %v; want %v", o.String(), got, err, want)
		}
	}
	if outcomeOK.String() != "ok" || outcomeRejected.String() != "rejected" || outcomeError.String() != "error" {
		t.Errorf("history text changed: %q %q %q", outcomeOK, outcomeRejected, outcomeError)
	}
	for _, o := range []attemptOutcome{outcomeNotLocked, outcomeStopped} {
		if r, err := check.ParseOutcome(o.String()); err == nil {
			t.Errorf("check.ParseOutcome(%q) = %v, want an error: %v leaves no section", o.String(), r, o)
		}
	}
	for _, s := range []string{"OK", "", "gate", "Outcome(0)"} {
		if o, err := check.ParseOutcome(s); err == nil {
			t.Errorf("check.ParseOutcome(%q) = %v, want an error", s, o)
		}
	}
}
