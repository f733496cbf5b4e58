// Command quorumlock is a distributed lock for the command line over
// independent Redis primaries (Redlock), with fencing tokens.
//
// Every subcommand lives in a file of its own and adds itself to
// subcommands from an init function with register. main only dispatches,
// owns the signal policy, and turns the subcommand's result into the exit
// status.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
)

// Exit statuses shared by every subcommand. Subcommands may define more
// (run: 75, 124-127 and the command's own status); each lists its own in
// its --help.
const (
	exitOK      = 0
	exitFailure = 1 // the subcommand failed; the reason is on stderr
	exitUsage   = 2 // bad flags or arguments; nothing was contacted
)

// usageError reports err as a usage error of subcommand cmd on w and
// returns exitUsage.
func usageError(w io.Writer, cmd string, err error) int {
	fmt.Fprintf(w, "quorumlock %s: %s\nRun \"quorumlock %s --help\" for usage.\n", cmd, redact(err.Error()), cmd)
	return exitUsage
}

// subcommand is one "quorumlock NAME" entry.
type subcommand struct {
	summary string // one line for the top-level usage
	hidden  bool   // left out of the top-level usage (still runnable)

	// ownSignals marks a subcommand that handles SIGINT and SIGTERM itself.
	// Otherwise main cancels run's ctx on the first of them (its
	// context.Cause names the signal) and a second one ends the process.
	ownSignals bool

	// run executes the subcommand with the arguments after its name and
	// returns the process exit status.
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// subcommands is filled by register from init functions.
var subcommands = map[string]subcommand{}

// movedOut names the programs that took over former subcommands, for the
// error a user with an old command line gets. They have heavy dependencies
// (etcd, gRPC, Toxiproxy; redsync) that this binary must not link.
var movedOut = map[string]string{
	"chaos":        "quorumlock-chaos (chaos/cmd/quorumlock-chaos; make chaos builds and runs it)",
	"chaos-worker": "quorumlock-chaos",
	"bench":        "quorumlock-bench (bench/cmd/qlbench; make bench runs it)",
}

// register adds a subcommand. It panics on a duplicate name or a nil run
// function: both are programming errors that every test run would catch.
func register(name string, s subcommand) {
	if name == "" || strings.HasPrefix(name, "-") {
		panic(fmt.Sprintf("quorumlock: invalid subcommand name %q", name))
	}
	if s.run == nil {
		panic("quorumlock: subcommand " + name + " has no run function")
	}
	if _, dup := subcommands[name]; dup {
		panic("quorumlock: subcommand " + name + " registered twice")
	}
	subcommands[name] = s
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch runs the subcommand named by args[0] and returns the exit status.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if _, ok := subcommands[args[1]]; ok {
				return dispatch([]string{args[1], "--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return exitOK
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, version())
		return exitOK
	}
	s, ok := subcommands[name]
	if !ok {
		if to, moved := movedOut[name]; moved {
			fmt.Fprintf(stderr, "quorumlock: %q is a program of its own now: %s\n", name, to)
			return exitUsage
		}
		fmt.Fprintf(stderr, "quorumlock: unknown command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	ctx := context.Background()
	if !s.ownSignals {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		// After the first signal, restore the default action so that a
		// second one ends a subcommand that is slow to wind down.
		context.AfterFunc(ctx, stop)
	}
	return s.run(ctx, args[1:], stdout, stderr)
}

// version is the program's version line; see versionLine.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "quorumlock (no build information)"
	}
	return versionLine(bi)
}

// versionLine is "quorumlock VERSION GO": VERSION is the module version the
// binary was built at, a release tag ("v0.1.0") when installed with
// `go install ...@v0.1.0` or built from a checkout of the tag, or a
// pseudo-version naming the commit ("v0.0.0-20261206040311-9262ed456f8d",
// "+dirty" with uncommitted changes) when built from any other commit. A
// build that recorded no version ("(devel)", e.g. with -buildvcs=false)
// gets the commit from the build's VCS settings when it has them.
func versionLine(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v != "" && v != "(devel)" {
		return "quorumlock " + v + " " + bi.GoVersion
	}
	v = "(devel)"
	var rev, dirty string
	for _, st := range bi.Settings {
		switch st.Key {
		case "vcs.revision":
			rev = st.Value
		case "vcs.modified":
			if st.Value == "true" {
				dirty = "+modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	return "quorumlock " + v + " " + bi.GoVersion
}

func usage(w io.Writer) {
	fmt.Fprint(w, `quorumlock: distributed locks over independent Redis primaries (Redlock),
with fencing tokens.

Usage:
  quorumlock <command> [flags] [arguments]

Commands:
`)
	names := make([]string, 0, len(subcommands))
	for name, s := range subcommands {
		if !s.hidden {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	for _, name := range names {
		fmt.Fprintf(tw, "  %s\t%s\n", name, subcommands[name].summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, `
Run "quorumlock <command> --help" for a command's flags and exit codes,
"quorumlock --version" for the version.

Exit codes of every command: 0 success, 1 failure, 2 usage error (bad flags
or arguments; no node was contacted). Commands add their own.
`)
}
