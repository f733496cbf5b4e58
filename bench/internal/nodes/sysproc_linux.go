package nodes

import "syscall"

// sysProcAttr makes the kernel kill a node when this process dies, even by
// SIGKILL, so an interrupted benchmark never leaves servers behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
