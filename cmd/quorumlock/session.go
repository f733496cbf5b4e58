//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/quorumlock/quorumlock/redlock"
)

// session is one run: the wait for the lock, then the command.
type session struct {
	rc             *runConfig
	path           string
	stdout, stderr io.Writer
	group          bool // the command runs in a process group of its own
	logger         *slog.Logger
	persist        *persistWatch // the persistence settings' warnings

	lockCtx    context.Context // ends the wait; never cancelled once the command started
	cancelLock context.CancelCauseFunc

	mu      sync.Mutex
	started bool      // the lock was obtained and the command is being started
	child   *exec.Cmd // the running command; nil before it starts and after it exits

	// Outcome, written by the function Do runs, read after Do returned.
	execErr    error
	lost       error // why the lease ended while the command ran
	status     int
	heldSince  time.Time
	lease      *redlock.Lease
	terminated bool // the command was stopped for a lost lease
}

// runProbeTimeout bounds run's startup check of the nodes (see
// redlock.WithProbeTimeout): a majority answers within a round trip.
const runProbeTimeout = 250 * time.Millisecond

// signalError is the cause of the wait's end when quorumlock got a signal.
type signalError struct{ sig syscall.Signal }

func (e signalError) Error() string { return "got " + signalName(e.sig) }

func (rc *runConfig) execute(stdout, stderr io.Writer) int {
	base := newLogger(stderr, rc.verbose)
	logger := base
	redis.SetLogger(redisLogger{l: logger})
	startupDone := func() {}
	if !rc.verbose {
		// Without --verbose, what New warns of at start still shows:
		// one line per node that refuses the credentials, does not
		// answer, or is set up unsafely.
		logger, startupDone = startupWarnings(stderr, "run")
	}

	// Find the command before touching the lock: a typo must not take it.
	path, err := exec.LookPath(rc.command[0])
	if err != nil {
		code := exitCannotExec
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			code = exitNotFound
		}
		fmt.Fprintf(stderr, "quorumlock run: %s\n", redact(err.Error()))
		return code
	}

	s := &session{rc: rc, path: path, stdout: stdout, stderr: stderr, group: !term.IsTerminal(int(os.Stdin.Fd())), logger: logger}
	s.lockCtx, s.cancelLock = context.WithCancelCause(context.Background())
	defer s.cancelLock(nil)

	// Catch signals before the first node is contacted, so none is lost
	// between the lock and the command start.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, forwardedSignals...)
	defer signal.Stop(sigs)
	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case sig := <-sigs:
				s.onSignal(sig.(syscall.Signal))
			case <-stopWatch:
				return
			}
		}
	}()
	defer func() { close(stopWatch); <-watchDone }()

	opts, err := rc.nodes.nodeOptions()
	if err != nil { // validated already; only a file that changed since
		return usageError(stderr, "run", err)
	}
	warnEven(stderr, "run", len(opts))
	cs := clients(opts, nil)
	defer closeAll(cs)
	ucs := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		ucs[i] = c
	}
	// A short probe: the nodes that do not answer it are checked when
	// they first answer, and a frozen node's probe call, which Close
	// waits for, ends with it.
	ropts := []redlock.Option{redlock.WithMaxTTL(rc.maxTTL.d), redlock.WithLogger(logger), redlock.WithProbeTimeout(runProbeTimeout)}
	if rc.fence {
		ropts = append(ropts, redlock.WithFencing())
	}
	if rc.maxHold.set {
		ropts = append(ropts, redlock.WithMaxHold(rc.maxHold.d))
	}
	if !rc.wait.set || rc.wait.d > 0 {
		// Say at once why the wait may be long; with --wait 0 the
		// final error says it.
		ropts = append(ropts, redlock.WithQuarantineNotice(func(n redlock.QuarantineNotice) {
			fmt.Fprintln(stderr, rc.quarantineNotice(n))
		}), redlock.WithUnavailableNotice(func(err error) {
			fmt.Fprintln(stderr, redact(rc.unavailableNotice(err)))
		}))
	}
	client, err := redlock.New(ucs, ropts...)
	startupDone()
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock run: %s\n", redact(err.Error()))
		return exitRunFailed
	}
	defer client.Close()
	plog := base
	if !rc.verbose {
		plog, _ = startupWarnings(stderr, "run")
	}
	s.persist = watchPersistence(cs, plog)

	// --wait bounds the wait for the lock only, never the command.
	var copts []redlock.CallOption
	if rc.wait.set {
		copts = append(copts, redlock.WaitAtMost(rc.wait.d))
	}
	if md := rc.holderMetadata(); md != "" {
		copts = append(copts, redlock.WithMetadata(md))
	}
	derr := client.Do(s.lockCtx, rc.key, rc.ttl.d, s.holding, copts...)
	if !s.started {
		// Not held (held elsewhere, the service down): the warnings
		// matter as much to a job that never runs.
		s.persist.settle()
	}
	s.persist.end()
	if derr != nil {
		logger.Debug("Do returned", "err", redact(derr.Error()))
	}
	return s.outcome(derr)
}
