package chaos

import (
	"bytes"
	"strings"
	"testing"
)

// TestWorkerProtocol: what a worker writes, the coordinator reads back as
// the same typed message, and anything else is ignored.
func TestWorkerProtocol(t *testing.T) {
	var b bytes.Buffer
	writeGate(&b, gateEvent{gate: GateRead, attempt: 3, token: 41, deadline: 123456789})
	writeDone(&b, 7)
	writeStats(&b, WorkerStats{Accepted: 7, Rejected: 2, Polls: 5, LastError: "no quorum"})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3: %q", len(lines), b.String())
	}
	m, ok := parseMessage(lines[0])
	if !ok || m.gate == nil || *m.gate != (gateEvent{gate: GateRead, attempt: 3, token: 41, deadline: 123456789}) {
		t.Errorf("gate line %q parsed as %+v, %v", lines[0], m, ok)
	}
	m, ok = parseMessage(lines[1])
	if !ok || m.done == nil || *m.done != 7 {
		t.Errorf("done line %q parsed as %+v, %v", lines[1], m, ok)
	}
	m, ok = parseMessage(lines[2])
	if !ok || m.stats == nil || *m.stats != (WorkerStats{Accepted: 7, Rejected: 2, Polls: 5, LastError: "no quorum"}) {
		t.Errorf("stats line %q parsed as %+v, %v", lines[2], m, ok)
	}
	for _, junk := range []string{"", "hello", "gate read x 1", "gate read 1 2", "done many", "stats {", "gate"} {
		if m, ok := parseMessage(junk); ok {
			t.Errorf("%q parsed as %+v, want it ignored", junk, m)
		}
	}
}

// TestOutcome: the recorded outcomes survive the history's text form; the
// worker-internal ones and unknown text do not parse.
func TestOutcome(t *testing.T) {
	for _, o := range []Outcome{OutcomeOK, OutcomeRejected, OutcomeError} {
		got, err := parseOutcome(o.String())
		if err != nil || got != o {
			t.Errorf("parseOutcome(%q) = %v, %v; want %v", o.String(), got, err, o)
		}
	}
	if OutcomeOK.String() != "ok" || OutcomeRejected.String() != "rejected" || OutcomeError.String() != "error" {
		t.Errorf("history text changed: %q %q %q", OutcomeOK, OutcomeRejected, OutcomeError)
	}
	for _, s := range []string{"not-locked", "stopped", "OK", "", "gate"} {
		if o, err := parseOutcome(s); err == nil {
			t.Errorf("parseOutcome(%q) = %v, want an error", s, o)
		}
	}
}
