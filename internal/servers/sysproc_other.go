//go:build unix && !linux

package servers

import "syscall"

// Without a parent-death signal a crashed test binary can leave servers
// running; they are still in their own group, so one kill -- -PGID ends each.
func sysProcAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Setpgid:    true,
		Credential: cred,
	}
}
