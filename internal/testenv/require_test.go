package testenv_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/testenv"
)

// outcomeTB records how a helper ended the test, so the skip-or-fail policy
// can be checked without failing the real test.
type outcomeTB struct {
	testing.TB
	outcome string // "", "skip" or "fatal"
	msg     string
}

func (o *outcomeTB) Helper() {}
func (o *outcomeTB) Fatal(args ...any) {
	o.outcome, o.msg = "fatal", fmt.Sprint(args...)
	runtime.Goexit()
}
func (o *outcomeTB) Fatalf(format string, args ...any) {
	o.outcome, o.msg = "fatal", fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (o *outcomeTB) Skipf(format string, args ...any) {
	o.outcome, o.msg = "skip", fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f on its own goroutine because the recorded Fatal and Skip end
// that goroutine, as the real ones do.
func (o *outcomeTB) run(f func(testing.TB)) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(o)
	}()
	<-done
}

func TestRequireBinariesMissing(t *testing.T) {
	const missing = "quorumlock-no-such-binary"
	for _, tc := range []struct {
		name, ci, require string
		want              string
	}{
		{name: "optional locally", ci: "", require: "", want: "skip"},
		{name: "required in CI", ci: "true", require: "", want: "fatal"},
		{name: "required by opt-in", ci: "", require: "1", want: "fatal"},
		{name: "CI must be exactly true", ci: "1", require: "", want: "skip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			t.Setenv("QUORUMLOCK_REQUIRE_BACKENDS", tc.require)
			o := &outcomeTB{TB: t}
			o.run(func(tb testing.TB) { testenv.RequireBinaries(tb, "redis-server", missing) })
			require.Equal(t, tc.want, o.outcome)
			require.Contains(t, o.msg, missing, "the message must name the missing binary")
		})
	}
}

func TestRequireBinariesPresent(t *testing.T) {
	o := &outcomeTB{TB: t}
	o.run(func(tb testing.TB) { testenv.RequireBinaries(tb, "sh") })
	require.Empty(t, o.outcome, "a binary on PATH must neither skip nor fail: %s", o.msg)
}
