package testenv

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

// Finish ends a TestMain that uses the shared PostgreSQL server: it stops
// the server (Shutdown), then, if the tests passed, checks with goleak that
// no goroutine was left running, in that order because the server's reaper
// goroutine lives until Shutdown. It returns the exit code for os.Exit:
// code, or 1 when either step failed (the cause goes to stderr).
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }
func Finish(code int) int {
	if err := Shutdown(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv.Shutdown:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
