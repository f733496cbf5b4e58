package servers

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// WaitStopped waits until every thread of pid is stopped by a SIGSTOP
// sent before, or pid has exited, for at most timeout.
//
// kill(2) returns once the signal is queued, not once the process has
// stopped. Linux wakes one thread to start the group stop; until that
// thread runs, the others go on, and on a loaded machine that took long
// enough for a worker frozen after its read to pass its gate and write,
// 14 ms after kill returned, before the freeze took hold. A caller that
// needs the process to do nothing more from now on (a frozen holder, a
// paused node) waits here.
func WaitStopped(pid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running, err := runningThreads(pid)
		if err != nil || running == 0 {
			return nil // exited (the caller learns that its own way), or stopped
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: pid %d: %d threads still running %v after SIGSTOP", pid, running, timeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// runningThreads counts the threads of pid that are neither stopped nor
// gone. An error means pid has no /proc entry (it exited).
func runningThreads(pid int) (int, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		fields, ok := statFields(dir + "/" + e.Name() + "/stat")
		if !ok || len(fields) == 0 {
			continue // the thread exited meanwhile
		}
		switch fields[0] {
		case "T", "t", "Z", "X", "x":
		default:
			n++
		}
	}
	return n, nil
}
