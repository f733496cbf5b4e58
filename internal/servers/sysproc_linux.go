package servers

import "syscall"

// Pdeathsig kills the server when the thread that started it dies, which in
// practice is when the test binary dies: the Go runtime only retires threads
// whose goroutine exited while locked to them, and this package never locks.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
}
