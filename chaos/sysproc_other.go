//go:build !linux

package chaos

import "syscall"

func workerProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
