package main

import (
	"context"
	"io"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/chaos"
)

// chaos-worker is the worker process of the chaos suite: the suite starts
// this binary once per worker, with its configuration in the environment,
// so that freezing or killing a worker is a signal to a real process.
func init() {
	register("chaos-worker", subcommand{
		summary: "internal: one worker process of the chaos suite",
		hidden:  true,
		run: func(ctx context.Context, _ []string, stdout, stderr io.Writer) int {
			redis.SetLogger(quietRedis{}) // the faults make failed dials on purpose
			return chaos.WorkerMain(ctx, os.Stdin, stdout, stderr)
		},
	})
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
