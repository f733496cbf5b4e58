package chaos

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress draws one line on a terminal: a bar over all runs' sections,
// the current run, and an estimate of the time left.
type progress struct {
	w       io.Writer
	mu      sync.Mutex
	total   int64
	doneRun int64 // sections of finished runs
	cur     int64
	curMax  int64
	label   string
	n, of   int
	started time.Time
}

func newProgress(w io.Writer, p Profile) *progress {
	pr := &progress{w: w, of: len(p.Runs), started: time.Now()}
	for _, s := range p.Runs {
		pr.total += int64(weight(s))
	}
	return pr
}

// weight estimates a run's cost in sections, with a floor for the
// scripted runs that are short in sections but not in time.
func weight(s Scenario) int { return max(s.Workers*s.Sections, 150) }

func (p *progress) start(i int, s Scenario) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.n, p.cur, p.curMax, p.label = i+1, 0, int64(weight(s)), s.Name()
	p.mu.Unlock()
	p.draw()
}

func (p *progress) update(done int64) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.cur = min(done, p.curMax)
	p.mu.Unlock()
	p.draw()
}

func (p *progress) end(int, Scenario) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	p.doneRun += p.curMax
	p.cur = 0
	p.mu.Unlock()
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	done := p.doneRun + p.cur
	frac := float64(done) / float64(max(p.total, 1))
	const width = 30
	filled := int(frac * width)
	left := "?"
	if el := time.Since(p.started); frac > 0.02 {
		left = (time.Duration(float64(el)/frac) - el).Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %3.0f%%  run %d/%d %s  about %s left",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), frac*100, p.n, p.of, p.label, left)
}

func (p *progress) clear() {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
}

func (p *progress) finish() { p.clear() }
