package main

import "os"

// isTerminal reports whether f is a character device other than the null
// device: close enough to isatty for deciding whether to draw a progress
// line, and the same on every platform.
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
