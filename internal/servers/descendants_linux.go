package servers

import (
	"os"
	"strconv"
	"strings"
)

// descendants lists every live process below pid. PostgreSQL puts each
// backend in a session of its own (setsid), so signalling the postmaster's
// process group misses them; an orphaned backend would outlive a Kill and
// keep the old shared memory attached, which makes the next start refuse.
func descendants(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fields, ok := statFields("/proc/" + e.Name() + "/stat")
		if !ok || len(fields) < 2 {
			continue // exited meanwhile
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		next := queue[0]
		queue = queue[1:]
		for _, c := range children[next] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// gone reports whether pid has exited: no longer listed, or a zombie (which
// holds no memory and no sockets).
func gone(pid int) bool {
	fields, ok := statFields("/proc/" + strconv.Itoa(pid) + "/stat")
	return !ok || len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}

// statFields reads a /proc stat file (of a process or a thread) and
// returns its fields after the parenthesised command name, which may
// itself hold spaces: state, ppid, ...; false when it cannot be read (the
// process or thread has exited).
func statFields(path string) ([]string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:]), true
}
