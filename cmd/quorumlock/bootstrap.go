package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

func init() {
	register("bootstrap", subcommand{
		summary: "admit the nodes of a brand-new deployment at once instead of after one max ttl",
		run:     bootstrapMain,
	})
}

func bootstrapUsage(w io.Writer, fs *flag.FlagSet, env flagEnv) {
	fmt.Fprint(w, `Usage: quorumlock bootstrap --nodes ADDR,... [--max-ttl D] [--timeout D]

A node only votes once it carries the deployment's settings (the number of
nodes, the max ttl, and the drift factor: always 0.01 here, as in run and
status). A node without them may have lost its data while a
lock it granted is still held, so it waits one max ttl from the first time a
client finds it (a new deployment too: it cannot be told apart from one
whose every node was wiped). bootstrap is the operator's statement that the
deployment is new: it admits every node at once, with these settings.

It refuses unless every node answers and none carries other settings or a
quarantine that a client already started (then that quarantine ends by
itself). Run it once, before the first client, with the --max-ttl every
client will use. Nodes already admitted with these settings are left alone.

Flags:
`)
	printFlags(w, fs, env)
	fmt.Fprint(w, `
Environment: QUORUMLOCK_PASSWORD, and the variables in [brackets] above.

Exit codes:
  0  every node is admitted
  1  refused or failed: the reason is on stderr (some nodes may be admitted)
  2  usage error: bad flags or arguments (no node was contacted)
`)
}

func bootstrapMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var nodes nodeConfig
	env := flagEnv{}
	fs := flag.NewFlagSet("quorumlock bootstrap", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	nodes.register(fs, env)
	maxTTL := durationFlag{d: redlock.DefaultMaxTTL, set: true}
	fs.Var(&maxTTL, "max-ttl", "the longest ttl (`duration`) any client of these nodes uses; every client must use the same")
	env["max-ttl"] = envMaxTTL
	timeout := durationFlag{d: 5 * time.Second, set: true}
	fs.Var(&timeout, "timeout", "`duration` bound on the whole step")
	if code, ok := parseFlags(fs, args, env, "bootstrap", bootstrapUsage, false, stdout, stderr); !ok {
		return code
	}
	if timeout.d <= 0 {
		return usageError(stderr, "bootstrap", errors.New("--timeout must be positive"))
	}
	if err := redlock.CheckTTL(maxTTL.d, redlock.WithMaxTTL(maxTTL.d)); err != nil {
		return usageError(stderr, "bootstrap", fmt.Errorf("--max-ttl: %w", err))
	}
	opts, err := nodes.nodeOptions()
	if err != nil {
		return usageError(stderr, "bootstrap", err)
	}
	redis.SetLogger(redisLogger{l: newLogger(stderr, false)})
	warnEven(stderr, "bootstrap", len(opts))

	ctx, cancel := context.WithTimeout(ctx, timeout.d)
	defer cancel()
	cs := clients(opts, nil)
	defer closeAll(cs)
	ucs := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		ucs[i] = c
	}
	lc, err := redlock.New(ucs, redlock.WithMaxTTL(maxTTL.d), redlock.WithProbeTimeout(timeout.d))
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock bootstrap: %s\n", redact(err.Error()))
		return exitFailure
	}
	defer lc.Close()
	if err := lc.Bootstrap(ctx); err != nil {
		fmt.Fprintf(stderr, "quorumlock bootstrap: %s\n", redact(err.Error()))
		return exitFailure
	}
	fmt.Fprintf(stdout, "admitted %d nodes (max ttl %v)\n", len(cs), maxTTL.d)
	return exitOK
}
