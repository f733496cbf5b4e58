package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock"
)

// readFlags are the flags of the read-only commands, status and check:
// the nodes, --json, --timeout (a bound on the whole read) and --max-ttl
// (the settings the nodes are compared with).
type readFlags struct {
	nodes   nodeConfig
	json    bool
	timeout durationFlag
	maxTTL  durationFlag
}

func (rf *readFlags) register(fs *flag.FlagSet, env flagEnv, timeout time.Duration, timeoutUsage string) {
	rf.nodes.register(fs, env)
	fs.BoolVar(&rf.json, "json", false, "print the report as JSON")
	rf.timeout = durationFlag{d: timeout, set: true}
	fs.Var(&rf.timeout, "timeout", timeoutUsage)
	rf.maxTTL = durationFlag{d: redlock.DefaultMaxTTL, set: true}
	fs.Var(&rf.maxTTL, "max-ttl", "the deployment's max ttl (`duration`), as its clients use it, to tell which nodes vote for them")
	env["max-ttl"] = envMaxTTL
}

// write prints rep as JSON (--json) or with print, and returns code, or
// exitFailure when the report cannot be written.
func (rf *readFlags) write(cmd string, rep any, print func(io.Writer) error, code int, stdout, stderr io.Writer) int {
	var err error
	if rf.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = print(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "quorumlock %s: %v\n", cmd, err)
		return exitFailure
	}
	return code
}

// options checks the parsed flags and returns the node options; a
// usage error is written to stderr and returned as an exit status.
func (rf *readFlags) options(cmd string, stderr io.Writer) ([]*redis.Options, int, bool) {
	if rf.timeout.d <= 0 {
		return nil, usageError(stderr, cmd, errors.New("--timeout must be positive")), false
	}
	opts, err := rf.nodes.nodeOptions()
	if err != nil {
		return nil, usageError(stderr, cmd, err), false
	}
	if err := redlock.CheckTTL(rf.maxTTL.d, redlock.WithMaxTTL(rf.maxTTL.d)); err != nil {
		return nil, usageError(stderr, cmd, fmt.Errorf("--max-ttl: %w", err)), false
	}
	return opts, 0, true
}

// readOnlyClient is the Client status and check read the nodes through:
// node clients that give up within timeout and do not retry, New's own
// check of the nodes (same server twice, replicas) within a third of it,
// so that a frozen node cannot use it all up, and nodes that refuse the
// credentials reported rather than fatal. done closes the Client and its
// node clients.
func readOnlyClient(opts []*redis.Options, timeout, maxTTL time.Duration, more ...redlock.Option) (lc *redlock.Client, done func(), err error) {
	cs := clients(opts, func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialerRetries = 1
		o.DialTimeout = timeout
		o.ReadTimeout = timeout
		o.WriteTimeout = timeout
		o.PoolSize = 1
	})
	ucs := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		ucs[i] = c
	}
	probe := max(timeout/3, time.Millisecond)
	o := append([]redlock.Option{redlock.WithMaxTTL(maxTTL), redlock.WithProbeTimeout(probe), redlock.WithoutRefusalCheck()}, more...)
	lc, err = redlock.New(ucs, o...)
	if err != nil {
		closeAll(cs)
		return nil, nil, err
	}
	return lc, func() { _ = lc.Close(); closeAll(cs) }, nil
}
