package chaos

import (
	"fmt"
	"maps"
	"sync"
	"time"
)

// faultLog is what a run's fault did, as the report shows it: when it was
// active, what happened step by step, and the few measures a fault takes
// itself. Scripts write to it while the workers run; it is safe for
// concurrent use.
type faultLog struct {
	mu       sync.Mutex
	from, to int64 // stampNs; from == 0: never marked, the whole run counts
	errText  string
	errLat   time.Duration
	blocked  time.Duration
	schedule []string
	counts   map[string]int
}

// count adds one to the faults of kind injected so far.
func (l *faultLog) count(kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.counts[kind]++
}

// mark starts (on) or ends the window in which the fault is active.
func (l *faultLog) mark(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on {
		l.from = stampNs()
	} else {
		l.to = stampNs()
	}
}

// close ends a window the script left open (it ran until the workers
// were done).
func (l *faultLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.from != 0 && l.to == 0 {
		l.to = stampNs()
	}
}

// note adds one line to the run's schedule.
func (l *faultLog) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.schedule = append(l.schedule, fmt.Sprintf(format, args...))
}

// lockError records a lock call the suite timed itself: how long it took,
// and its error if it failed.
func (l *faultLog) lockError(lat time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errLat = lat
	if err != nil {
		l.errText = oneLine(err)
	}
}

// setBlocked records how long the other workers waited for the holder.
func (l *faultLog) setBlocked(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.blocked = d
}

func (l *faultLog) blockedFor() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blocked
}

// faultRecord is a faultLog's content once the run is over.
type faultRecord struct {
	from, to int64
	errText  string
	errLat   time.Duration
	blocked  time.Duration
	schedule []string
	counts   map[string]int
}

func (l *faultLog) record() faultRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return faultRecord{from: l.from, to: l.to, errText: l.errText, errLat: l.errLat, blocked: l.blocked, schedule: l.schedule,
		counts: maps.Clone(l.counts)}
}
