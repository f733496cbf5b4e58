package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteTable writes one line per run, for a terminal.
func WriteTable(w io.Writer, rep *Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPOLOGY\tFAULT\tFENCING\tSTALL\tSECTIONS\tLOST\tOVERLAPS\tSTALE-OVL\tREJECTED\tTOKEN-INV\tLINEARIZABLE\tVERDICT\tSEED")
	for _, r := range rep.Runs {
		verdict := "ok"
		if !r.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n",
			r.Topology, r.Fault, r.Fencing, stallLabel(r), r.Sections, r.LostUpdates, r.Overlaps,
			r.StaleOverlaps, r.Rejected, r.TokenInversions, r.Linearizable, verdict, r.Seed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeComparisons(w, rep.Comparisons)
	WriteSoak(w, rep)
	for _, r := range rep.Failed() {
		fmt.Fprintf(w, "FAIL %s/%s/%s (seed %d): %s\n", r.Topology, r.Fault, r.Fencing, r.Seed, strings.Join(r.Failure, "; "))
	}
	for _, c := range rep.FailedComparisons() {
		fmt.Fprintf(w, "FAIL stall %g%% without fencing (waiters: %s): median %d lost vs %d published (%.2fx, allowed %gx)\n",
			c.StallRate*100, waiters(c.PollMs), c.LostMedian, c.PublishedMedian, c.Ratio, PublishedTolerance)
	}
	return nil
}

func stallLabel(r Result) string {
	if r.StallRate == 0 {
		return "-"
	}
	l := fmt.Sprintf("%g%%/%dms", r.StallRate*100, r.WorkMs)
	if r.PollMs > 0 {
		l += fmt.Sprintf("/poll%dms", r.PollMs)
	}
	return l
}

// waiters says how a run's waiters waited for the lock.
func waiters(pollMs int64) string {
	if pollMs > 0 {
		return fmt.Sprintf("poll %d ms", pollMs)
	}
	return "Lock"
}

// WriteMarkdown writes the report as Markdown; svg, when not empty, is the
// file name of the plot to link.
func WriteMarkdown(w io.Writer, rep *Report, svg string) error {
	fmt.Fprintf(w, "# Chaos report: profile %s\n\n", rep.Profile)
	fmt.Fprintf(w, "Backend %s, seed %d (`quorumlock-chaos --profile %s --seed %d` reproduces it), %d runs in %.0f s, started %s.\n\n",
		rep.Backend, rep.Seed, rep.Profile, rep.Seed, len(rep.Runs), float64(rep.DurationMs)/1000, rep.Started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintln(w, "| topology | fault | fencing | stall | sections | lost | overlaps | stale overlaps | rejected | token inversions | linearizable | blocked | lock wait (median, max) | expected | verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|---|---|---|")
	for _, r := range rep.Runs {
		verdict := "ok"
		if !r.Pass {
			verdict = "**FAIL**: " + strings.Join(r.Failure, "; ")
		}
		blocked := "-"
		if r.BlockedMs > 0 {
			blocked = fmt.Sprintf("%d ms", r.BlockedMs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d | %d | %d | %d | %d | %d | %s | %s | %d, %d ms | %s | %s |\n",
			r.Topology, r.Fault, r.Fencing, stallLabel(r), r.Sections, r.LostUpdates, r.Overlaps,
			r.StaleOverlaps, r.Rejected, r.TokenInversions, r.Linearizable, blocked, r.WaitMedianMs, r.WaitMaxMs, r.Expect, verdict)
	}
	if sumSoak(rep) != nil {
		fmt.Fprint(w, "\n## Nemesis\n")
		WriteSoak(w, rep)
	}
	if sum := stallSummary(rep); len(sum) > 0 {
		fmt.Fprint(w, "\n## Stalled sections\n\n")
		fmt.Fprintln(w, "| topology | stall rate | work | fencing | waiters | runs | lost (median, range) | rejected (median) | late writes accepted (overwritten themselves), all runs | lost per late write between sections | counter between read and write (median share) | lock wait, max (median over runs) |")
		fmt.Fprintln(w, "|---|---|---|---|---|---:|---|---:|---|---:|---:|---:|")
		for _, s := range sum {
			per := "-"
			if between := s.late - s.lateOver; between > 0 {
				per = fmt.Sprintf("%.1f", float64(s.lostSum-int64(s.lateOver))/float64(between))
			}
			fmt.Fprintf(w, "| %s | %g%% | %d ms | %s | %s | %d | %d (%d-%d) | %d | %d (%d) | %s | %.2f | %d ms |\n", s.topo, s.rate*100, s.work, s.mode, waiters(s.poll),
				s.runs, s.lostMed, s.lostMin, s.lostMax, s.rejMed, s.late, s.lateOver, per, s.shareMed, s.waitMaxMed)
		}
		fmt.Fprintln(w, "\nA late write that lands between two sections erases every increment made since its read; one")
		fmt.Fprintln(w, "that lands while the next holder is between its read and its write is itself overwritten, and")
		fmt.Fprintln(w, "only its own increment is lost. Lost per late write between sections is (all lost - overwritten)")
		fmt.Fprintln(w, "/ (late - overwritten) over the runs; the share of time the counter sat between a read and its")
		fmt.Fprintln(w, "write is about the chance that a late write is overwritten (see docs/chaos.md).")
	}
	if svg != "" {
		fmt.Fprintf(w, "\n![lost updates against the stall rate](%s)\n", svg)
	}
	if len(rep.Comparisons) > 0 {
		fmt.Fprintf(w, "\n## Against the published experiment\n\nLost updates without fencing, median (range) over the runs; the median must land within %gx of the published one.\n\n", PublishedTolerance)
		fmt.Fprintln(w, "| stall rate | waiters | runs | here | published | ratio | verdict |")
		fmt.Fprintln(w, "|---|---|---:|---|---|---:|---|")
		for _, c := range rep.Comparisons {
			fmt.Fprintf(w, "| %g%% | %s | %d | %d (%d-%d) | %d (%d-%d) | %.2f | %s |\n", c.StallRate*100, waiters(c.PollMs), c.Runs,
				c.LostMedian, c.LostMin, c.LostMax, c.PublishedMedian, c.PublishedMin, c.PublishedMax, c.Ratio, c.Verdict)
		}
	}
	var notes []string
	for _, r := range rep.Runs {
		if len(r.Schedule) > 0 || r.Error != "" {
			sched := r.Schedule
			if len(sched) > 12 {
				// A nemesis run's schedule is thousands of steps: the JSON report has them all.
				sched = append(slices.Clone(sched[:10]), fmt.Sprintf("and %d more (see the JSON report)", len(sched)-10))
			}
			n := fmt.Sprintf("- %s/%s/%s: %s", r.Topology, r.Fault, r.Fencing, strings.Join(sched, "; "))
			if r.Error != "" {
				n += fmt.Sprintf(" Error (%d ms): `%s`", r.ErrorLatencyMs, truncate(r.Error, 200))
			}
			notes = append(notes, n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprint(w, "\n## What each fault did\n\n")
		fmt.Fprintln(w, strings.Join(notes, "\n"))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

type stallRow struct {
	topo                      string
	rate                      float64
	work                      int64
	mode                      string
	poll                      int64
	runs                      int
	lostMed, lostMin, lostMax int64
	rejMed                    int64
	late, lateOver            int
	lostSum                   int64
	shareMed                  float64
	waitMaxMed                int64
}

func stallSummary(rep *Report) []stallRow {
	type key struct {
		topo string
		rate float64
		work int64
		mode string
		poll int64
	}
	lost := map[key][]int64{}
	rej := map[key][]int64{}
	late := map[key][2]int{}
	share := map[key][]float64{}
	wait := map[key][]int64{}
	for _, r := range rep.Runs {
		if r.Fault != stallFault {
			continue
		}
		k := key{r.Topology, r.StallRate, r.WorkMs, r.Fencing, r.PollMs}
		lost[k] = append(lost[k], r.LostUpdates)
		rej[k] = append(rej[k], int64(r.Rejected))
		l := late[k]
		late[k] = [2]int{l[0] + r.LateWrites, l[1] + r.LateOverwritten}
		share[k] = append(share[k], r.ReadWriteShare)
		wait[k] = append(wait[k], r.WaitMaxMs)
	}
	var out []stallRow
	for k, l := range lost {
		slices.Sort(l)
		rj := rej[k]
		slices.Sort(rj)
		sh := share[k]
		slices.Sort(sh)
		wt := wait[k]
		slices.Sort(wt)
		var sum int64
		for _, v := range l {
			sum += v
		}
		out = append(out, stallRow{k.topo, k.rate, k.work, k.mode, k.poll, len(l), l[len(l)/2], l[0], l[len(l)-1], rj[len(rj)/2],
			late[k][0], late[k][1], sum, sh[len(sh)/2], wt[len(wt)/2]})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.topo != b.topo {
			return slices.Index(allTopologies, a.topo) < slices.Index(allTopologies, b.topo)
		}
		if a.work != b.work {
			return a.work < b.work
		}
		if a.poll != b.poll {
			return a.poll < b.poll
		}
		if a.rate != b.rate {
			return a.rate < b.rate
		}
		return slices.Index(fencingModes, a.mode) < slices.Index(fencingModes, b.mode)
	})
	return out
}

// HasStallRuns reports whether the report has runs to plot.
func HasStallRuns(rep *Report) bool { return len(stallSummary(rep)) > 0 }

// WriteSVG plots the median lost updates against the stall rate, one line
// per fencing mode (and work duration and way of waiting), as a
// self-contained SVG.
func WriteSVG(w io.Writer, rep *Report) error {
	rows := stallSummary(rep)
	const W, H, left, right, top, bottom = 640.0, 400.0, 60.0, 170.0, 30.0, 50.0
	pw, ph := W-left-right, H-top-bottom
	var rates []float64
	var maxLost int64 = 1
	for _, r := range rows {
		if !slices.Contains(rates, r.rate) {
			rates = append(rates, r.rate)
		}
		maxLost = max(maxLost, r.lostMax)
	}
	slices.Sort(rates)
	x := func(rate float64) float64 {
		i := slices.Index(rates, rate)
		if len(rates) == 1 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(rates)-1)
	}
	ymax := niceCeil(float64(maxLost))
	y := func(v float64) float64 { return top + ph - ph*v/ymax }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="18" font-size="14">Lost updates per run (median, bars: range) against the stall rate</text>`+"\n", left)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, top, left, top+ph)
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n",
			left, y(v), left+pw, y(v), left-6, y(v)+4, v)
	}
	for _, r := range rates {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%g%%</text>`+"\n", x(r), top+ph+18, r*100)
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">sections that stall</text>`+"\n", left+pw/2, H-10)
	colors := map[string]string{"none": "#d62728", "write-only": "#ff7f0e", "claim-first": "#2ca02c", "fence-table": "#1f77b4"}
	type series struct {
		topo string
		mode string
		work int64
		poll int64
	}
	var order []series
	pts := map[series][]stallRow{}
	for _, r := range rows {
		s := series{r.topo, r.mode, r.work, r.poll}
		if _, ok := pts[s]; !ok {
			order = append(order, s)
		}
		pts[s] = append(pts[s], r)
	}
	for i, s := range order {
		c := colors[s.mode]
		dash := ""
		switch {
		case s.poll > 0:
			dash = ` stroke-dasharray="2,2"`
		case i > 0 && s.work != order[0].work:
			dash = ` stroke-dasharray="5,3"`
		case s.topo != Single:
			dash = ` stroke-dasharray="8,2,2,2"`
		}
		label := fmt.Sprintf("%s, %d ms work", s.mode, s.work)
		if s.topo != Single {
			label = s.topo + " " + label
		}
		if s.poll > 0 {
			label += fmt.Sprintf(", poll %d ms", s.poll)
		}
		var path []string
		for _, p := range pts[s] {
			path = append(path, fmt.Sprintf("%.1f,%.1f", x(p.rate), y(float64(p.lostMed))))
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", x(p.rate), y(float64(p.lostMin)), x(p.rate), y(float64(p.lostMax)), c)
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.rate), y(float64(p.lostMed)), c)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(path, " "), c, dash)
		ly := top + 16*float64(i)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"%s/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+pw+10, ly, left+pw+30, ly, c, dash, left+pw+35, ly+4, label)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
