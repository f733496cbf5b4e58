package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// The benchmark compares quorumlock with go-redsync/redsync, so it lives in
// its own module (bench/) and is never linked into this binary: the main
// module must not depend on redsync. "quorumlock bench" runs that program
// instead, found in this order:
//
//  1. $QUORUMLOCK_BENCH, a path to the benchmark binary;
//  2. quorumlock-bench next to this executable;
//  3. the source tree around the working directory (a bench/go.mod of
//     module benchModule), built with the go command into a temporary
//     directory;
//  4. quorumlock-bench on PATH.
const (
	benchBinary = "quorumlock-bench"
	benchModule = "github.com/quorumlock/quorumlock/bench"
)

func init() {
	register("bench", subcommand{
		summary:    "compare quorumlock with redsync on five local redis-server nodes (runs bench/)",
		ownSignals: true,
		run:        runBench,
	})
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// Signals are forwarded to the benchmark, which stops (and thaws) its
	// Redis nodes before it exits; this process waits for it.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)

	bin, cleanup, err := findBench(ctx, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "quorumlock bench:", err)
		return exitFailure
	}
	defer cleanup()

	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "quorumlock bench:", err)
		return exitFailure
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			return benchStatus(err, stderr)
		}
	}
}

func benchStatus(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	fmt.Fprintln(stderr, "quorumlock bench:", err)
	return exitFailure
}

// findBench returns the benchmark binary to run and a function that removes
// whatever was built for it.
func findBench(ctx context.Context, stderr io.Writer) (string, func(), error) {
	none := func() {}
	if p := os.Getenv("QUORUMLOCK_BENCH"); p != "" {
		if !isExecutable(p) {
			return "", none, fmt.Errorf("QUORUMLOCK_BENCH=%s is not an executable file", p)
		}
		return p, none, nil
	}
	if exe, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(exe), benchBinary); isExecutable(p) {
			return p, none, nil
		}
	}
	if dir, ok := benchSource(); ok {
		if _, err := exec.LookPath("go"); err == nil {
			return buildBench(ctx, dir, stderr)
		}
	}
	if p, err := exec.LookPath(benchBinary); err == nil {
		return p, none, nil
	}
	return "", none, errors.New(`the benchmark is a separate program (it links redsync, which this binary must not)
and none was found. Either:
  - run "quorumlock bench" inside the quorumlock source tree with Go installed
    (it builds bench/ itself), or run "make bench" there;
  - or build it once: cd bench && go build -o quorumlock-bench ./cmd/qlbench,
    and put quorumlock-bench next to quorumlock or on PATH
    (or point QUORUMLOCK_BENCH at it)`)
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// benchSource looks for the bench module in the working directory and its
// parents.
func benchSource() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		for _, cand := range []string{filepath.Join(dir, "bench"), dir} {
			if moduleOf(filepath.Join(cand, "go.mod")) == benchModule {
				return cand, true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func moduleOf(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

// buildBench builds the benchmark from the source tree into a temporary
// directory (go run would keep signals from reaching the program).
// -mod=mod lets bench/go.sum catch up when the main module gained a
// dependency since bench/ was last tidied.
func buildBench(ctx context.Context, dir string, stderr io.Writer) (string, func(), error) {
	tmp, err := os.MkdirTemp("", "quorumlock-bench-")
	if err != nil {
		return "", func() {}, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	bin := filepath.Join(tmp, benchBinary)
	fmt.Fprintf(stderr, "quorumlock bench: building %s from %s\n", benchModule, dir)
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", bin, "./cmd/qlbench")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		cleanup()
		return "", func() {}, fmt.Errorf("building the benchmark in %s: %w", dir, err)
	}
	return bin, cleanup, nil
}
