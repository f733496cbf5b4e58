//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("run", subcommand{
		summary:    "run a command while holding a lock on a key (a distributed flock)",
		ownSignals: true, // forwarded to the command, not used to cancel
		run:        runMain,
	})
}

const (
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
