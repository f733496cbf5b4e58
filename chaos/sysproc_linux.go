package chaos

import "syscall"

// workerProcAttr puts a worker in its own process group and kills it when
// the coordinator dies, so nothing outlives an interrupted suite.
func workerProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
