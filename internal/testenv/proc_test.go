package testenv_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func itoa(n int) string { return strconv.Itoa(n) }

// procState returns the one-letter state from /proc/PID/stat ("T" when
// stopped by a signal).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	require.NoError(t, err)
	// The command name is in parentheses and may contain spaces.
	rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
	fields := strings.Fields(rest)
	require.NotEmpty(t, fields)
	return fields[0]
}
