// Package flagdoc prints a flag.FlagSet the way quorumlock's commands
// document their flags: "--name kind" on one line, then the usage text
// with its default and the environment variable it falls back to. The
// quorumlock CLI, the chaos suite and the benchmark all print their flags
// through it, so that the three read alike.
package flagdoc

import (
	"flag"
	"fmt"
	"io"
)

// Print writes fs's flags to w in --name form (one-letter names keep a
// single dash), each with its usage text, its default unless that is a
// zero value, and env[name], the environment variable it falls back to,
// if any. The kind is the back-quoted word of the usage text, as
// flag.UnquoteUsage finds it.
func Print(w io.Writer, fs *flag.FlagSet, env map[string]string) {
	fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-"
		}
		line := "  " + dashes + f.Name
		if kind != "" {
			line += " " + kind
		}
		fmt.Fprintln(w, line)
		extra := ""
		if e, ok := env[f.Name]; ok {
			extra = " [$" + e + "]"
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" && d != "0s" {
			extra = " (default " + d + ")" + extra
		}
		fmt.Fprintf(w, "      %s%s\n", text, extra)
	})
}
