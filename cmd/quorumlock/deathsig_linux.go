package main

import "syscall"

// setParentDeathSignal makes the kernel kill the command if quorumlock
// dies without forwarding anything (SIGKILL, OOM killer): nobody would
// renew its lease any more.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
