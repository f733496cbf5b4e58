package servers

import (
	"context"
	"os"
	"strconv"
	"strings"
)

// ownerLabel identifies this process: host name, pid and the process's start
// time, so that a reused pid is not mistaken for the owner.
func ownerLabel() string {
	host, _ := os.Hostname()
	return host + "/" + strconv.Itoa(os.Getpid()) + "/" + processStart(os.Getpid())
}

// processStart returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), or "" where that is not available.
func processStart(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces; fields after it do not.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return ""
	}
	return fields[19]
}

// reapOrphans removes containers this package started from a process on this
// host that no longer exists. Containers of live processes, of other hosts,
// or without a start time to compare are left alone.
func reapOrphans() {
	ctx := context.Background()
	out, err := dockerCmd(ctx, "ps", "--all", "--no-trunc",
		"--filter", "label="+labelManaged,
		"--format", `{{.ID}} {{.Label "`+labelOwner+`"}}`)
	if err != nil {
		return
	}
	orphans := orphanIDs(out, func() string { h, _ := os.Hostname(); return h }(), processStart)
	if len(orphans) > 0 {
		_, _ = dockerCmd(ctx, append([]string{"rm", "--force", "--volumes"}, orphans...)...)
	}
}

// orphanIDs picks, from lines of "ID OWNER", the containers whose owner ran
// on host and is gone: its pid no longer has the recorded start time.
func orphanIDs(psOutput, host string, startOf func(pid int) string) []string {
	var ids []string
	for line := range strings.Lines(psOutput) {
		id, owner, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		parts := strings.Split(owner, "/")
		if len(parts) != 3 || parts[0] != host || parts[2] == "" {
			continue
		}
		pid, err := strconv.Atoi(parts[1])
		if err != nil || startOf(pid) == parts[2] {
			continue
		}
		ids = append(ids, id)
	}
	return ids
}
