package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/quorumlock/quorumlock/bench/internal/suite"
)

// floorFor is the floor a scenario's rows are compared with: the floor
// measured in the same scenario, else the uncontended one.
func floorFor(rs []suite.Result, scenario string) (suite.Result, bool) {
	if f, ok := Find(rs, scenario, "floor"); ok {
		return f, true
	}
	return Find(rs, suite.Uncontended, "floor")
}

// redsyncFor is the redsync row a scenario's rows are compared with.
func redsyncFor(rs []suite.Result, scenario string) (suite.Result, bool) {
	switch scenario {
	case suite.UncontendedFenced:
		scenario = suite.Uncontended
	case suite.ContendedSeparate:
		scenario = suite.Contended
	case suite.TwoDownHealthy:
		return suite.Result{}, false
	}
	return Find(rs, scenario, "redsync")
}

func opt(p *float64, format string) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf(format, *p)
}

func ratio(a, b float64) string {
	if a == 0 || b == 0 {
		return "-"
	}
	if r := a / b; r < 0.1 || r >= 100 {
		return fmt.Sprintf("%.2g", r)
	}
	return fmt.Sprintf("%.2f", a/b)
}

// Row is one line of the table, already formatted.
type Row []string

// Header names the table's columns.
var Header = Row{"scenario", "impl", "variant", "n", "p50 µs", "p99 µs", "ops/s", "allocs/op", "calls/op",
	"p50/floor", "p50/redsync", "handoff p95 µs", "waiter p99 µs", "lock p99 µs", "waiter share", "errors"}

// Rows formats the results, except the renew runs (RenewRows).
func Rows(rs []suite.Result) []Row {
	var out []Row
	for _, r := range rs {
		if r.Renew != nil {
			continue
		}
		var fl, rv string = "-", "-"
		if f, ok := floorFor(rs, r.Scenario); ok && r.Impl != "floor" && !strings.HasPrefix(r.Scenario, "contended") {
			fl = ratio(r.P50us, f.P50us)
		}
		if x, ok := redsyncFor(rs, r.Scenario); ok && r.Impl != "redsync" {
			rv = ratio(r.P50us, x.P50us)
		}
		share := "-"
		if r.WaiterShare != nil {
			share = fmt.Sprintf("%.1f%%", 100**r.WaiterShare)
		}
		out = append(out, Row{r.Scenario, r.Impl, r.Variant, fmt.Sprint(r.Samples),
			fmt.Sprintf("%.0f", r.P50us), fmt.Sprintf("%.0f", r.P99us), fmt.Sprintf("%.0f", r.OpsPerSec),
			opt(r.AllocsPerOp, "%.0f"), opt(r.CallsPerOp, "%.1f"), fl, rv, opt(r.HandoffP95us, "%.0f"),
			opt(r.WaiterP99us, "%.0f"), opt(r.LockP99us, "%.0f"), share,
			fmt.Sprint(r.Errors)})
	}
	return out
}

// Text writes the results and the targets as aligned text.
func Text(w io.Writer, rs []suite.Result, ts []Target) {
	textTable(w, Header, Rows(rs))
	for _, t := range []struct {
		h    Row
		rows []Row
	}{{CostHeader, CostRows(rs)}, {RenewHeader, RenewRows(rs)}} {
		if len(t.rows) > 0 {
			fmt.Fprintln(w)
			textTable(w, t.h, t.rows)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tmeasured\tlimit\tresult\tdetail")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, num(t.Measured, t.Unit), limit(t), verdict(t), t.Detail)
	}
	_ = tw.Flush()
}

// Markdown writes the run's description and the same tables in Markdown.
func Markdown(w io.Writer, m Meta, rs []suite.Result, ts []Target) {
	fmt.Fprintf(w, "%s mode, %.0f s, started %s; %s, GOMAXPROCS=%d of %d CPUs, redis %s, ttl %d ms.\n",
		m.Mode, m.Seconds, m.Started, m.GoVersion, m.GOMAXPROCS, m.CPUs, m.RedisVersion, m.TTLms)
	fmt.Fprintf(w, "Load average (1, 5, 15 min): before %s, after %s.\n\n", Load(m.LoadBefore), Load(m.LoadAfter))
	mdTable(w, Header, Rows(rs))
	if cr := CostRows(rs); len(cr) > 0 {
		fmt.Fprintln(w)
		mdTable(w, CostHeader, cr)
	}
	if rr := RenewRows(rs); len(rr) > 0 {
		fmt.Fprintln(w)
		mdTable(w, RenewHeader, rr)
	}
	fmt.Fprintf(w, "\n| target | measured | limit | result | detail |\n| --- | --- | --- | --- | --- |\n")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Name, num(t.Measured, t.Unit), limit(t), verdict(t), t.Detail)
	}
}

// textTable writes one table as right-aligned text columns.
func textTable(w io.Writer, h Row, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(h, "\t")+"\t")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
}

func mdTable(w io.Writer, h Row, rows []Row) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(h, " | "), strings.Repeat(" --- |", len(h)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
}

// Load formats load averages, or says they were not read.
func Load(l []float64) string {
	if len(l) == 0 {
		return "unknown"
	}
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(s, " ")
}

// CostHeader names the columns of the table of where the work went
// (uncontended and many-keys).
var CostHeader = Row{"scenario", "impl", "variant", "ops/s", "sent cmds/op", "round trips/op", "node cmds/op",
	"nodes CPU µs/op", "client CPU µs/op", "CPU µs/op", "cores busy"}

// CostRows formats the rows that measured CPU per operation. "cores
// busy" is the CPU the nodes and this process used per second of the
// run, in cores: at the machine's core count the run was CPU-bound.
func CostRows(rs []suite.Result) []Row {
	var out []Row
	for _, r := range rs {
		if r.NodesCPUusPerOp == nil {
			continue
		}
		total, busy := "-", "-"
		if r.ClientCPUusPerOp != nil {
			t := *r.NodesCPUusPerOp + *r.ClientCPUusPerOp
			total = fmt.Sprintf("%.0f", t)
			busy = fmt.Sprintf("%.2f", t*r.OpsPerSec/1e6)
		}
		out = append(out, Row{r.Scenario, r.Impl, r.Variant, fmt.Sprintf("%.0f", r.OpsPerSec),
			opt(r.CallsPerOp, "%.1f"), opt(r.TripsPerOp, "%.2f"), opt(r.NodeCmdsPerOp, "%.1f"),
			opt(r.NodesCPUusPerOp, "%.0f"), opt(r.ClientCPUusPerOp, "%.0f"), total, busy})
	}
	return out
}

// RenewHeader names the columns of the renew table.
var RenewHeader = Row{"scenario", "impl", "variant", "leases", "held", "lost", "window s",
	"sent cmds/s", "sent cmds/s per node", "node cmds/s", "round trips/node/period", "cmds/lease/period",
	"client CPU s/s", "nodes CPU s/s", "round trip p50 µs", "p99 µs", "lock phase cmds", "release phase cmds",
	"client B/lease", "beyond fn", "goroutines/lease beyond fn", "node B/lease", "errors"}

// RenewRows formats the renew runs.
func RenewRows(rs []suite.Result) []Row {
	var out []Row
	for _, r := range rs {
		x := r.Renew
		if x == nil {
			continue
		}
		out = append(out, Row{r.Scenario, r.Impl, r.Variant, fmt.Sprint(x.Leases), fmt.Sprint(x.Held), fmt.Sprint(x.Lost),
			fmt.Sprintf("%.1f", x.WindowS), fmt.Sprintf("%.0f", x.SentCmdsPerSec), floats(x.SentCmdsPerSecNode, "%.0f"),
			fmt.Sprintf("%.0f", x.NodeCmdsPerSec), floats(x.TripsPerPeriodNode, "%.1f"), fmt.Sprintf("%.2f", x.CmdsPerLeasePeriod),
			opt(x.ClientCPU, "%.3f"), fmt.Sprintf("%.3f", x.NodesCPU), fmt.Sprintf("%.0f", r.P50us), fmt.Sprintf("%.0f", r.P99us),
			fmt.Sprint(x.LockPhaseCmds), fmt.Sprint(x.ReleasePhaseCmds),
			fmt.Sprintf("%.0f", x.ClientBytesPerLease), fmt.Sprintf("%.0f", x.ClientBytesBeyondFn), fmt.Sprintf("%.2f", x.GoroutinesPerLease), fmt.Sprintf("%.0f", x.NodeBytesPerLease),
			fmt.Sprint(r.Errors)})
	}
	return out
}

func floats(vs []float64, format string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(s, " ")
}

func num(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	case "x":
		if v != 0 && (v < 0.1 || v >= 100) {
			return fmt.Sprintf("%.2gx", v)
		}
		return fmt.Sprintf("%.2fx", v)
	case "share":
		return fmt.Sprintf("%.0f%%", 100*v)
	case "n":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func limit(t Target) string {
	if t.AtMost {
		return "<= " + num(t.Limit, t.Unit)
	}
	return ">= " + num(t.Limit, t.Unit)
}

func verdict(t Target) string {
	if t.Met {
		return "met"
	}
	return "MISSED"
}
