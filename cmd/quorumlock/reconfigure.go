package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("reconfigure", subcommand{
		summary: "move a live deployment to another max ttl, drift factor or node list",
		run:     reconfigureMain,
	})
}

// exitIncomplete is reconfigure's "run it again": the nodes it reached
// are safe to leave as they are, and a rerun goes on from there.
const exitIncomplete = 75

func reconfigureUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock reconfigure --from-nodes ADDR,... [--from-max-ttl D --from-drift F]
                             --nodes ADDR,... [--max-ttl D] [--drift F] [--timeout D] [-v]

The nodes refuse a client whose settings (node count, max ttl, drift factor)
differ from the ones they were admitted with. reconfigure moves a deployment
in use from its old settings and nodes (--from-*) to new ones without a
moment in which a client of each could hold the same key. The old max ttl
and drift factor are read from the old nodes unless --from-max-ttl or
--from-drift is given (then both are checked against the nodes), and the
downtime is printed once every node answered:

  1. it marks the old nodes so that they refuse clients of the old settings
     (they get a configuration error at once; a node that leaves refuses
     everyone), and marks the new nodes;
  2. once all but a minority of the old nodes refuse them and a majority
     of the new nodes carry the mark, it says so ("start the clients of
     the new settings now"), stamps a hold-off of the longer of the two
     restart quarantines (max ttl plus drift) on each new node, waits it
     out and admits the nodes with the new settings.

No client gets a lock from step 1 until the hold-off ends: that is the
downtime, about the longer quarantine plus a few round trips. Clients built
with the new settings wait it out by themselves and lock as soon as it ends;
start them (or restart your service with the new settings) when the
command says so, not before: on unmarked new nodes they would start a
deployment of their own. Nodes in both lists keep their data. The node list may gain,
lose or replace nodes, but only together with a change of the max ttl or the
drift factor (with the same settings the nodes could not tell a client of the
old list from one of the new; one millisecond more max ttl will do).

It writes nothing unless every new node and enough old nodes answer, and
each is in a state it can move: the nodes record the change (old and new
settings, new nodes), and a run with other old settings or another node
list while a change is under way is refused and told which change that is.
If it stops (a node down, Ctrl-C, --timeout), run it again with the same
flags: it is idempotent and keeps the hold-offs it stamped, and a run after
the change finished says "already done" and writes nothing. --nodes and the
credential flags apply to both lists.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD, and the variables in [brackets] above.

Exit codes:
  0   done: every node of both lists was reached, the new settings hold
  1   refused or failed: the reason is on stderr (also when nodes refuse
      the credentials, ACL user or TLS certificates)
  2   usage error: bad flags or arguments (no node was contacted)
  75  incomplete: some nodes did not answer, or the wait was cut short; run
      it again with the same flags
`)
}

func reconfigureMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var nodes nodeConfig
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock reconfigure", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes.register(fs, env)
	var fromNodes string
	fs.StringVar(&fromNodes, "from-nodes", "", "the deployment's current `nodes`, as its clients list them now")
	var fromTTL durationFlag
	fs.Var(&fromTTL, "from-max-ttl", "the max ttl (`duration`) the current clients use (default: as the old nodes record it)")
	fromDrift := redlock.DefaultDriftFactor
	fs.Float64Var(&fromDrift, "from-drift", fromDrift, "the drift `factor` the current clients use (default: as the old nodes record it, else 0.01)")
	maxTTL := durationFlag{d: redlock.DefaultMaxTTL, set: true}
	fs.Var(&maxTTL, "max-ttl", "the max ttl (`duration`) every client will use from now on")
	env["max-ttl"] = envMaxTTL
	newDrift := redlock.DefaultDriftFactor
	fs.Float64Var(&newDrift, "drift", newDrift, "the drift `factor` every client will use from now on")
	timeout := durationFlag{d: 10 * time.Second, set: true}
	fs.Var(&timeout, "timeout", "`duration` bound on reaching the nodes, on top of the hold-off")
	var verbose bool
	fs.BoolVar(&verbose, "verbose", false, "log each step to stderr")
	fs.BoolVar(&verbose, "v", false, "short for --verbose")
	if code, ok := parseFlags(fs, args, env, "reconfigure", reconfigureUsage, false, stdout, stderr); !ok {
		return code
	}
	if timeout.d <= 0 {
		return usageError(stderr, "reconfigure", errors.New("--timeout must be positive"))
	}
	// --from-max-ttl or --from-drift: the old settings are given (the
	// other one its default) and checked against the nodes; neither: they
	// are read from the old nodes.
	var fromOpts []redlock.Option
	holdOld := time.Duration(0)
	typed := false
	fs.Visit(func(f *flag.Flag) { typed = typed || f.Name == "from-max-ttl" || f.Name == "from-drift" })
	if typed {
		oldTTL := redlock.DefaultMaxTTL
		if fromTTL.set {
			oldTTL = fromTTL.d // 0 included: refused below, not replaced by the default
		}
		var err error
		if holdOld, err = redlock.Quarantine(oldTTL, fromDrift); err != nil {
			return usageError(stderr, "reconfigure", fmt.Errorf("--from-max-ttl/--from-drift: %w", err))
		}
		fromOpts = []redlock.Option{redlock.WithMaxTTL(oldTTL), redlock.WithDriftFactor(fromDrift)}
	}
	holdNew, err := redlock.Quarantine(maxTTL.d, newDrift)
	if err != nil {
		return usageError(stderr, "reconfigure", fmt.Errorf("--max-ttl/--drift: %w", err))
	}
	if fromNodes == "" {
		return usageError(stderr, "reconfigure", errors.New("no old nodes: give --from-nodes host:port,... (the list the current clients use)"))
	}
	newOpts, err := nodes.nodeOptions()
	if err != nil {
		return usageError(stderr, "reconfigure", err)
	}
	from := nodes
	from.nodes = fromNodes
	oldOpts, err := from.nodeOptions()
	if err != nil {
		return usageError(stderr, "reconfigure", fmt.Errorf("--from-nodes: %w", err))
	}
	logger := newLogger(stderr, verbose)
	redis.SetLogger(redisLogger{l: logger})
	// The library logs its steps (step=...): once every node answered and
	// can be moved (checked), the downtime is known; after step 1
	// (marked), the clients of the new settings may start; and a change
	// an earlier run finished is done.
	var done bool
	logger = slog.New(stepHandler{Handler: logger.Handler(), step: func(step string, attrs map[string]slog.Value) {
		switch step {
		case "checked":
			fmt.Fprintf(stdout, "reconfiguring %d nodes (%s) to %d nodes (%s): no lock for about %v\n",
				len(oldOpts), attrs["from"].String(), len(newOpts), attrs["to"].String(), attrs["holdoff"].Duration().Round(time.Millisecond))
		case "marked":
			fmt.Fprintln(stdout, "the old nodes refuse the old settings and the new nodes are marked: start the clients of the new settings now (they wait out the hold-off by themselves)")
		case "done":
			done = true
			fmt.Fprintf(stdout, "already done: the nodes carry the new settings (%s) and the old nodes that leave are retired; nothing was written\n", attrs["to"].String())
		}
	}})

	// The hold-off on top of the bound on reaching the nodes. With the old
	// settings read from the nodes, the old quarantine is not known yet:
	// the bound allows for the longest a max ttl may be.
	hold := max(holdOld, holdNew)
	if fromOpts == nil {
		hold = 2 * redlock.MaxMaxTTL
	}
	ctx, cancel := context.WithTimeout(ctx, hold+timeout.d)
	defer cancel()
	ncs, ocs := clients(newOpts, nil), clients(oldOpts, nil)
	defer closeAll(ncs)
	defer closeAll(ocs)
	lc, err := redlock.New(universal(ncs), redlock.WithMaxTTL(maxTTL.d), redlock.WithDriftFactor(newDrift),
		redlock.WithProbeTimeout(timeout.d), redlock.WithLogger(logger))
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock reconfigure: %s\n", redact(err.Error()))
		return exitFailure
	}
	defer lc.Close()
	start := time.Now()
	err = lc.Reconfigure(ctx, universal(ocs), fromOpts...)
	switch {
	case errors.Is(err, redlock.ErrNodeRefused):
		// Running it again cannot help: the nodes refuse the credentials,
		// the ACL user or the TLS certificates (exit 1, not 75).
		fmt.Fprintf(stderr, "quorumlock reconfigure: %s\nquorumlock reconfigure: nodes refused this client's configuration: fix it before running reconfigure again\n", redact(err.Error()))
		return exitFailure
	case errors.Is(err, redlock.ErrReconfigureIncomplete):
		fmt.Fprintf(stderr, "quorumlock reconfigure: %s\n", redact(err.Error()))
		return exitIncomplete
	case err != nil:
		fmt.Fprintf(stderr, "quorumlock reconfigure: %s\n", redact(err.Error()))
		return exitFailure
	}
	if !done {
		fmt.Fprintf(stdout, "reconfigured in %v: the nodes carry the new settings\n", time.Since(start).Round(time.Millisecond))
	}
	return exitOK
}

func universal(cs []*redis.Client) []redis.UniversalClient {
	out := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// stepHandler passes records on to Handler and calls step with the
// record's attributes when the library logs a reconfiguration's step (an
// attribute step=...).
type stepHandler struct {
	slog.Handler
	step func(step string, attrs map[string]slog.Value)
}

func (h stepHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l == slog.LevelInfo || h.Handler.Enabled(ctx, l)
}

func (h stepHandler) Handle(ctx context.Context, r slog.Record) error {
	attrs := map[string]slog.Value{}
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.Resolve()
		return true
	})
	if s, ok := attrs["step"]; ok {
		h.step(s.String(), attrs)
	}
	if !h.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h stepHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return stepHandler{h.Handler.WithAttrs(as), h.step}
}

func (h stepHandler) WithGroup(name string) slog.Handler {
	return stepHandler{h.Handler.WithGroup(name), h.step}
}
