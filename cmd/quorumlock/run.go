//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/quorumlock/quorumlock/internal/nodeconf"
	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("run", subcommand{
		summary:    "run a command while holding a lock on a key (a distributed flock)",
		ownSignals: true, // forwarded to the command, not used to cancel
		run:        runMain,
	})
}

// Exit statuses of run besides the command's own. 124 to 127 follow
// timeout(1) and env(1), so scripts that know those read them right.
const (
	exitTempFail   = 75  // EX_TEMPFAIL: lock held by someone else throughout --wait
	exitUnavail    = 69  // EX_UNAVAILABLE: the nodes could not grant the lock (no majority answered, quarantine)
	exitLeaseLost  = 124 // the lease ended while the command ran; it was stopped
	exitRunFailed  = 125 // quorumlock itself failed
	exitCannotExec = 126 // the command was found but could not be started
	exitNotFound   = 127 // the command was not found
)

const (
	envMaxTTL       = nodeconf.EnvMaxTTL
	envFencingToken = "QUORUMLOCK_FENCING_TOKEN"
	defaultGrace    = 10 * time.Second
)

type runConfig struct {
	nodes   nodeConfig
	key     string
	ttl     durationFlag
	wait    durationFlag // not set: wait until obtained
	maxHold durationFlag
	grace   durationFlag
	maxTTL  durationFlag
	fence   bool
	verbose bool
	command []string
	// metadata is stored with the lock for "quorumlock status" to show;
	// without --metadata, who holds it: host, pid and command.
	metadata    string
	metadataSet bool
}

func runUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock run --nodes ADDR,... --key K --ttl D [flags] -- CMD [ARGS...]

Takes the lock on K on a majority of the nodes, runs CMD while renewing the
lease every ttl/3, and releases the lock when CMD exits. CMD runs in a
process group of its own (unless stdin is a terminal); signals sent to
quorumlock (INT, TERM, HUP, QUIT, USR1, USR2) are forwarded to that group.
If the lease is lost or ends (renewals failed, or --max-hold reached), CMD
gets SIGTERM and, after --grace, SIGKILL, and quorumlock exits 124.

With --fence, CMD gets the lease's fencing token in $QUORUMLOCK_FENCING_TOKEN:
a number larger for every later holder of K, for the resource to refuse
stale writers with. The lease cannot stop CMD from acting after its lease
ended (paused process, slow write); a fencing token checked by the resource
can.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD (password of every node; removed from CMD's
environment), and the variables in [brackets] above. Flags win over them.

Exit codes:
  0-255  CMD's exit status, when CMD exited by itself
  2      usage error: bad flags or arguments (no node was contacted)
  69     the lock was not obtained within --wait because the lock service
         could not grant it (EX_UNAVAILABLE): fewer than a majority of
         nodes answered, or too few are admitted to vote (a restart
         quarantine, a reconfiguration's hold-off); alert on it
  75     the lock was not obtained within --wait because someone else
         holds it (EX_TEMPFAIL); a job that runs again later skips this turn
  124    the lease was lost or ended while CMD ran; CMD was terminated
  125    quorumlock itself failed, or the configuration is wrong: a node
         refuses the credentials, ACL user, database or TLS certificates,
         settings that disagree with the deployment's, two entries that
         reach one server (the same address twice is a usage error, 2)
  126    CMD was found but could not be started
  127    CMD was not found
  128+N  CMD died of signal N; also when quorumlock got signal N while
         still waiting for the lock (CMD never ran)
`)
}

// parseRun returns the configuration, or the exit status to end with.
func parseRun(args []string, stdout, stderr io.Writer) (*runConfig, int, bool) {
	rc := &runConfig{}
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rc.nodes.register(fs, env)
	fs.StringVar(&rc.key, "key", "", "the lock's `key` (required)")
	fs.Var(&rc.ttl, "ttl", "lease `duration`, renewed every ttl/3 while CMD runs; whole milliseconds, at most --max-ttl (required)")
	fs.Var(&rc.wait, "wait", "give up after this `duration` if the lock is held (0: try once; default: wait until obtained)")
	fs.Var(&rc.maxHold, "max-hold", "stop renewing after CMD has held the lock this `duration`, so a hung CMD cannot keep it forever (default: no limit)")
	rc.grace = durationFlag{d: defaultGrace, set: true}
	fs.Var(&rc.grace, "grace", "after a lost lease, the `duration` CMD has between SIGTERM and SIGKILL")
	rc.maxTTL = durationFlag{d: redlock.DefaultMaxTTL, set: true}
	fs.Var(&rc.maxTTL, "max-ttl", "the longest ttl (`duration`) any client of these nodes uses; also how long a node that restarted empty is kept from voting (use the same value everywhere)")
	env["max-ttl"] = envMaxTTL
	fs.BoolVar(&rc.fence, "fence", false, "mint a fencing token (one more round trip) and pass it in $"+envFencingToken)
	fs.StringVar(&rc.metadata, "metadata", "", fmt.Sprintf("`text` stored with the lock while CMD runs, shown by \"quorumlock status\" (at most %d bytes; \"\" for none; default: host=HOST pid=PID cmd=\"CMD ARGS\")", redlock.MaxMetadata))
	fs.BoolVar(&rc.verbose, "verbose", false, "log lock events to stderr")
	fs.BoolVar(&rc.verbose, "v", false, "short for --verbose")

	if code, ok := parseFlags(fs, args, env, "run", runUsage, true, stdout, stderr); !ok {
		return nil, code, false
	}
	rc.command = fs.Args()
	fs.Visit(func(f *flag.Flag) { rc.metadataSet = rc.metadataSet || f.Name == "metadata" })
	if err := rc.validate(); err != nil {
		return nil, usageError(stderr, "run", err), false
	}
	return rc, 0, true
}

func usageError(w io.Writer, cmd string, err error) int {
	fmt.Fprintf(w, "quorumlock %s: %s\nRun \"quorumlock %s --help\" for usage.\n", cmd, redact(err.Error()), cmd)
	return exitUsage
}

// validate checks everything that can be checked without a node, so that
// bad input never takes or blocks a lock.
func (rc *runConfig) validate() error {
	if rc.key == "" {
		return errors.New("--key is required and must not be empty")
	}
	if err := redlock.CheckKey(rc.key); err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	if !rc.ttl.set {
		return errors.New("--ttl is required (for example --ttl 30s)")
	}
	if err := redlock.CheckTTL(rc.ttl.d, redlock.WithMaxTTL(rc.maxTTL.d)); err != nil {
		return fmt.Errorf("--ttl %v with --max-ttl %v: %w", rc.ttl.d, rc.maxTTL.d, err)
	}
	if rc.maxHold.set && rc.maxHold.d == 0 {
		return errors.New("--max-hold must be positive (leave it out for no limit)")
	}
	if len(rc.command) == 0 {
		return errors.New("missing command: quorumlock run [flags] -- CMD [ARGS...]")
	}
	if rc.command[0] == "" {
		return errors.New("empty command name")
	}
	if len(rc.metadata) > redlock.MaxMetadata {
		return fmt.Errorf("--metadata is %d bytes, at most %d", len(rc.metadata), redlock.MaxMetadata)
	}
	_, err := rc.nodes.nodeOptions()
	return err
}

func runMain(_ context.Context, args []string, stdout, stderr io.Writer) int {
	rc, code, ok := parseRun(args, stdout, stderr)
	if !ok {
		return code
	}
	return rc.execute(stdout, stderr)
}

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

// quarantineNotice is the line run prints when the nodes are in their
// restart quarantine: once, as soon as the first attempt finds it.
func (rc *runConfig) quarantineNotice(n redlock.QuarantineNotice) string {
	left := "about " + n.Left.Round(time.Second).String()
	if n.Left <= 0 {
		left = "up to one quarantine"
		if q, err := redlock.Quarantine(rc.maxTTL.d, redlock.DefaultDriftFactor); err == nil {
			left = "up to " + q.Round(time.Second).String()
		}
	} else if n.Left < time.Second {
		left = "about " + n.Left.Round(time.Millisecond).String()
	}
	if n.Reconfiguring() {
		msg := "quorumlock run: reconfiguration hold-off, " + strings.TrimPrefix(left, "about ") + " left: a change to these settings is under way and locks are refused until it ends; waiting"
		if n.Left <= 0 {
			msg = "quorumlock run: reconfiguration hold-off: a change to these settings is under way and locks are refused until it ends (" + left + "); waiting"
		}
		return msg + rc.waitNote(n) + " (the nodes admit themselves when it ends)"
	}
	msg := fmt.Sprintf("quorumlock run: the nodes are new or lost their data: locks are refused for %s while they serve their restart quarantine; waiting", left)
	return msg + rc.waitNote(n) + " (the nodes admit themselves when it ends; quorumlock bootstrap admits only a deployment nobody has used yet)"
}

// unavailableNotice is the line run prints, once, when it starts to wait
// because the lock service cannot grant the lock (fewer than a majority of
// nodes answer): not a holder, so cron may want to alert rather than skip.
func (rc *runConfig) unavailableNotice(err error) string {
	what := err.Error()
	var e *redlock.NotObtainedError
	if errors.As(err, &e) {
		what = e.Detail
	}
	until := "until a majority of nodes answers"
	if rc.wait.set {
		until += fmt.Sprintf(" or --wait %v ends (then exit %d)", rc.wait.d, exitUnavail)
	}
	return "quorumlock run: the lock service cannot grant the lock now (" + what + "); waiting " + until
}

// waitNote says when --wait will end the wait before the nodes do.
func (rc *runConfig) waitNote(n redlock.QuarantineNotice) string {
	if rc.wait.set && n.Left > rc.wait.d {
		return fmt.Sprintf(" (longer than --wait %v, which will end first)", rc.wait.d)
	}
	return ""
}

// holderMetadata is what run stores with the lock: --metadata, or by
// default who holds it, as host=HOST pid=PID cmd="CMD ARGS" (the pid is
// quorumlock's, which holds the lock; the command is cut to fit).
func (rc *runConfig) holderMetadata() string {
	if rc.metadataSet {
		return rc.metadata
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "?"
	}
	head := fmt.Sprintf("host=%s pid=%d cmd=", host, os.Getpid())
	// The nodes keep it for anyone who runs status: a password on the
	// command line (a DSN, PGPASSWORD=...) is masked.
	cmd := redact(strings.Join(rc.command, " "))
	if len(cmd) > redlock.MaxMetadata {
		cmd = strings.ToValidUTF8(cmd[:redlock.MaxMetadata], "")
	}
	for len(head)+len(strconv.Quote(cmd)) > redlock.MaxMetadata && cmd != "" {
		_, size := utf8.DecodeLastRuneInString(cmd)
		cmd = cmd[:len(cmd)-size]
	}
	return head + strconv.Quote(cmd)
}

func (s *session) onSignal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		if stopsWaiting(sig) {
			s.cancelLock(signalError{sig})
		}
		return
	}
	if s.child != nil {
		s.signalChild(sig)
	}
}

// signalChild sends sig to the command (its whole process group when it
// has one). s.mu must be held and s.child set.
func (s *session) signalChild(sig syscall.Signal) {
	if s.group {
		_ = syscall.Kill(-s.child.Process.Pid, sig)
		return
	}
	_ = s.child.Process.Signal(sig)
}

// holding runs the command while Do keeps the lease; ctx ends when the
// lease is lost or ends.
func (s *session) holding(ctx context.Context, l *redlock.Lease) error {
	// Print the settings' warnings before the command's own output.
	s.persist.settle()
	s.mu.Lock()
	if err := context.Cause(s.lockCtx); err != nil {
		// The wait ended just as the lock came: do not start.
		s.mu.Unlock()
		return err
	}
	s.started = true
	s.heldSince, s.lease = time.Now(), l
	cmd := exec.Command(s.path, s.rc.command[1:]...)
	cmd.Args[0] = s.rc.command[0]
	cmd.Env = childEnv(os.Environ(), s.rc.fence, l.FencingToken())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, s.stdout, s.stderr
	cmd.SysProcAttr = procAttr(s.group)
	if err := cmd.Start(); err != nil {
		s.execErr = err
		s.mu.Unlock()
		return nil
	}
	s.child = cmd
	s.mu.Unlock()
	s.logger.Info("lock obtained; command started", "key", l.Key(), "fencing_token", l.FencingToken(), "pid", cmd.Process.Pid, "valid_until", l.Deadline().Format(time.RFC3339Nano))

	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in cmd.ProcessState
		close(exited)
	}()

	select {
	case <-exited:
		// A lease that ended before the exit was seen may have ended before
		// the command finished: report it as lost, to be safe.
		select {
		case <-l.Done():
			s.lost = errors.New("the lease ended before the command's exit was seen")
		default:
		}
	case <-ctx.Done():
		s.lost = context.Cause(ctx)
		s.terminated = true
		s.terminate(exited)
	}
	s.mu.Lock()
	s.child = nil
	s.mu.Unlock()
	s.status = exitStatus(cmd.ProcessState)
	return nil
}

// terminate stops the command after its lease ended: SIGTERM, then SIGKILL
// after the grace period. The group gets SIGKILL even when the command
// exited in time, so that nothing it started goes on without the lock.
func (s *session) terminate(exited <-chan struct{}) {
	fmt.Fprintf(s.stderr, "quorumlock run: lease on %q lost while the command ran (%s); sending SIGTERM\n", s.rc.key, s.lostReason())
	s.mu.Lock()
	s.signalChild(syscall.SIGTERM)
	s.mu.Unlock()
	t := time.NewTimer(s.rc.grace.d)
	defer t.Stop()
	select {
	case <-exited:
		if s.group {
			s.mu.Lock()
			s.signalChild(syscall.SIGKILL)
			s.mu.Unlock()
		}
	case <-t.C:
		fmt.Fprintf(s.stderr, "quorumlock run: command still running %v after SIGTERM; sending SIGKILL\n", s.rc.grace.d)
		s.mu.Lock()
		s.signalChild(syscall.SIGKILL)
		s.mu.Unlock()
		<-exited
	}
}

func (s *session) lostReason() string {
	if errors.Is(s.lost, redlock.ErrMaxHold) || (s.rc.maxHold.set && time.Since(s.heldSince) >= s.rc.maxHold.d) {
		return fmt.Sprintf("held for --max-hold %v, so renewal stopped and it ran out", s.rc.maxHold.d)
	}
	if s.lost == nil {
		return "unknown cause"
	}
	// A majority no longer holding it shows as a deadline still ahead.
	if s.lease != nil && time.Now().Before(s.lease.Deadline()) {
		return "a majority of nodes no longer hold it: it expired, was deleted, or was taken over"
	}
	return "its validity ran out before a renewal reached a majority of nodes"
}

// outcome turns the run into the exit status, with a message for every
// status that is not the command's own.
func (s *session) outcome(derr error) int {
	rc := s.rc
	switch {
	case !s.started:
		cause := context.Cause(s.lockCtx)
		var se signalError
		if errors.As(cause, &se) {
			fmt.Fprintf(s.stderr, "quorumlock run: %s while waiting for the lock on %q; the command was not run\n", signalName(se.sig), rc.key)
			return 128 + int(se.sig)
		}
		if errors.Is(derr, redlock.ErrConfigMismatch) || errors.Is(derr, redlock.ErrNodeRefused) && !errors.Is(derr, redlock.ErrNotObtained) {
			// Configuration, not contention: trying later does not help.
			fmt.Fprintf(s.stderr, "quorumlock run: %s; the command was not run\n", redact(fmt.Sprint(derr)))
			return exitRunFailed
		}
		if errors.Is(derr, redlock.ErrNotObtained) {
			how := "within --wait " + rc.wait.d.String()
			if rc.wait.set && rc.wait.d == 0 {
				how = "in one attempt (--wait 0)"
			}
			if redlock.IsUnavailable(derr) {
				fmt.Fprintf(s.stderr, "quorumlock run: lock %q not obtained %s: the lock service is unavailable: %s; the command was not run\n", rc.key, how, redact(describeNotObtained(derr)))
				return exitUnavail
			}
			fmt.Fprintf(s.stderr, "quorumlock run: lock %q not obtained %s: %s; the command was not run\n", rc.key, how, redact(describeNotObtained(derr)))
			return exitTempFail
		}
		fmt.Fprintf(s.stderr, "quorumlock run: %s\n", redact(fmt.Sprint(derr)))
		return exitRunFailed
	case s.execErr != nil:
		fmt.Fprintf(s.stderr, "quorumlock run: cannot start %s: %s\n", redact(rc.command[0]), redact(s.execErr.Error()))
		if errors.Is(s.execErr, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	case s.lost != nil:
		if !s.terminated {
			fmt.Fprintf(s.stderr, "quorumlock run: the lease on %q ended about when the command exited (status %d); it may have run without the lock at the end\n", rc.key, s.status)
		} else {
			fmt.Fprintf(s.stderr, "quorumlock run: the command was stopped because the lease on %q was lost; its exit status was %d\n", rc.key, s.status)
		}
		return exitLeaseLost
	}
	return s.status
}

// describeNotObtained summarises the per-node causes of the last attempt.
func describeNotObtained(err error) string {
	var ne *redlock.NotObtainedError
	if !errors.As(err, &ne) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "the wait ended before an attempt completed"
		}
		return fmt.Sprint(err)
	}
	// An attempt stops once it is decided: the nodes not heard from by
	// then may be in the same state as those counted.
	atLeast := ""
	if ne.Replied < ne.Nodes {
		atLeast = "at least "
	}
	var held, quarantined, silent, failed int
	var firstFailure, firstSilent string
	for _, n := range ne.NodeErrors() {
		switch {
		case errors.Is(n.Err, redlock.ErrNodeHeld):
			held++
		case errors.Is(n.Err, redlock.ErrNodeQuarantined):
			quarantined++
		case errors.Is(n.Err, context.DeadlineExceeded) || errors.Is(n.Err, context.Canceled):
			// Slow, or not waited for once the attempt could no longer
			// succeed: the library labels both the same way.
			silent++
			if firstSilent == "" {
				firstSilent = n.Error()
			}
		default:
			failed++
			if firstFailure == "" {
				firstFailure = n.Error()
			}
		}
	}
	var parts []string
	if ne.Reason == redlock.ReasonNoQuorum && held+quarantined+silent+failed > 0 {
		// The library's account names the unreachable nodes and why.
		parts = append(parts, ne.Detail)
		if firstFailure == "" {
			firstFailure = firstSilent
		}
		if firstFailure != "" {
			parts = append(parts, "first: "+firstFailure)
		}
		return strings.Join(parts, "; ")
	}
	if held > 0 {
		parts = append(parts, fmt.Sprintf("held by another owner on %s%d of %d nodes", atLeast, held, ne.Nodes))
	}
	if quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%s%d of %d nodes in restart quarantine", atLeast, quarantined, ne.Nodes))
	}
	if silent > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) did not answer in time (first: %s)", silent, firstSilent))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) failed or did not answer (first: %s)", failed, firstFailure))
	}
	if quarantined > 0 {
		// Not "run quorumlock bootstrap": the attempt itself started the
		// quarantines, and bootstrap never ends one.
		when := "when their quarantine ends"
		if ne.Wait > 0 {
			when = fmt.Sprintf("when the first quarantine ends, in about %v", ne.Wait.Round(time.Millisecond))
		}
		parts = append(parts, fmt.Sprintf("the nodes admit themselves %s (quorumlock status shows them; quorumlock bootstrap admits only a deployment nobody has used yet)", when))
	}
	if len(parts) == 0 {
		if ne.Reason == redlock.ReasonCancelled {
			return "the wait ended before an attempt completed"
		}
		return ne.Detail
	}
	return strings.Join(parts, "; ")
}

// childEnv is the command's environment: ours, without the node password
// and without any fencing token inherited from an outer quorumlock (a
// stale token would let the command pass a fence it does not hold).
func childEnv(env []string, fence bool, token uint64) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		return strings.HasPrefix(kv, envFencingToken+"=") || strings.HasPrefix(kv, envPassword+"=")
	})
	if fence {
		out = append(out, fmt.Sprintf("%s=%d", envFencingToken, token))
	}
	return out
}
