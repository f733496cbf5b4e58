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

// Rows formats the results.
func Rows(rs []suite.Result) []Row {
	var out []Row
	for _, r := range rs {
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(Header, "\t")+"\t")
	for _, r := range Rows(rs) {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tmeasured\tlimit\tresult\tdetail")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, num(t.Measured, t.Unit), limit(t), verdict(t), t.Detail)
	}
	_ = tw.Flush()
}

// Markdown writes the same tables in Markdown.
func Markdown(w io.Writer, rs []suite.Result, ts []Target) {
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(Header, " | "), strings.Repeat(" --- |", len(Header)))
	for _, r := range Rows(rs) {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintf(w, "\n| target | measured | limit | result | detail |\n| --- | --- | --- | --- | --- |\n")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", t.Name, num(t.Measured, t.Unit), limit(t), verdict(t), t.Detail)
	}
}

func num(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.0f ms", v)
	case "x":
		return fmt.Sprintf("%.2fx", v)
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
