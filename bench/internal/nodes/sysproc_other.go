//go:build !linux

package nodes

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
