//go:build unix

package main

import (
	"os"
	"syscall"
)

// forwardedSignals are caught by run and passed on to the command.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2,
}

// stopsWaiting reports whether sig, received before the command started,
// abandons the wait for the lock. USR1 and USR2 are meant for the
// command and are dropped while there is none.
func stopsWaiting(sig syscall.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return sig.String()
}

// exitStatus is the status a shell would report for the command:
// 128+N when it died of signal N.
func exitStatus(ps *os.ProcessState) int {
	if ps == nil {
		return exitRunFailed
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// procAttr puts the command in a process group of its own when group is
// set, so that a lost lease stops everything it started, not only the
// direct child (a shell's children would otherwise go on without the
// lock). With stdin on a terminal the command stays in quorumlock's group
// instead: a background group could not read the terminal.
func procAttr(group bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: group}
	setParentDeathSignal(a)
	return a
}
