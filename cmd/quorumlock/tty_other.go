//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// isTerminal reports whether f is a character device other than the null
// device: a portable approximation of isatty.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}

func setParentDeathSignal(*syscall.SysProcAttr) {}
