package chaos

import (
	"strings"
	"testing"
)

// A run that expected fencing to refuse the stale writer and saw no
// refusal says which section errors came instead, when there were any.
func TestEvaluateNamesTheSectionErrorsInsteadOfARefusal(t *testing.T) {
	r := Result{Linearizable: "ok", SectionErrors: 2, SectionError: "fencing: WriteClaimed: conn closed"}
	r.evaluate(Expect{Rejection: true}, nil)
	if r.Pass || len(r.Failure) != 1 ||
		!strings.Contains(r.Failure[0], "the stale writer was never rejected (2 sections ended in an error instead; the last: fencing: WriteClaimed: conn closed)") {
		t.Errorf("failures %q, pass %v", r.Failure, r.Pass)
	}

	r = Result{Linearizable: "ok"}
	r.evaluate(Expect{Rejection: true}, nil)
	if len(r.Failure) != 1 || r.Failure[0] != "the stale writer was never rejected" {
		t.Errorf("no section errors: failures %q", r.Failure)
	}
}
