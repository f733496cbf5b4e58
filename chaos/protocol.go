package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// gatePoint is a point in a worker's loop where it can wait for the
// coordinator, so a fault lands at a chosen moment of a chosen section.
type gatePoint string

// Gates, in the order a section reaches them.
const (
	gateStart  gatePoint = "start"  // before the lock call
	gateLocked gatePoint = "locked" // the lease is held, nothing read yet
	gateRead   gatePoint = "read"   // the counter was read, not yet written
)

// Worker protocol on stdout, one line per message:
//
//	gate NAME ATTEMPT TOKEN DEADLINE   then the worker waits for one line on stdin
//	done N                    N sections accepted so far
//	stats {json}              at the end
//
// The writers and the parser below are its only home.

// gateEvent is a worker stopped at a gate.
type gateEvent struct {
	gate    gatePoint
	attempt int
	token   uint64
	// deadline is when the lease held at the gate stops being valid, as
	// a stamp of the machine's monotonic clock (stampNs); 0 where no
	// lease is held, or it has no deadline.
	deadline int64
}

func writeGate(w io.Writer, ev gateEvent) {
	fmt.Fprintf(w, "gate %s %d %d %d\n", ev.gate, ev.attempt, ev.token, ev.deadline)
}

func writeDone(w io.Writer, accepted int) { fmt.Fprintf(w, "done %d\n", accepted) }

func writeStats(w io.Writer, st workerStats) {
	b, _ := json.Marshal(st)
	fmt.Fprintf(w, "stats %s\n", b)
}

// message is one parsed line; exactly one of its fields is set.
type message struct {
	gate  *gateEvent
	done  *int64
	stats *workerStats
}

// parseMessage reads one line of the protocol; ok is false for anything
// else (a worker's stray output is ignored, as before).
func parseMessage(line string) (m message, ok bool) {
	kind, rest, _ := strings.Cut(line, " ")
	switch kind {
	case "gate":
		var ev gateEvent
		var name string
		if _, err := fmt.Sscanf(rest, "%s %d %d %d", &name, &ev.attempt, &ev.token, &ev.deadline); err != nil {
			return m, false
		}
		ev.gate = gatePoint(name)
		m.gate = &ev
	case "done":
		var n int64
		if _, err := fmt.Sscanf(rest, "%d", &n); err != nil {
			return m, false
		}
		m.done = &n
	case "stats":
		var st workerStats
		if json.Unmarshal([]byte(rest), &st) != nil {
			return m, false
		}
		m.stats = &st
	default:
		return m, false
	}
	return m, true
}
