package main

import (
	"context"
	"io"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/chaos"
)

// workerArg, as the first argument, makes this binary one worker process
// of the suite instead of the suite: the suite starts itself once per
// worker (chaos.Options.WorkerCommand), with the worker's configuration in
// the environment, so that freezing or killing a worker is a signal to a
// real process. It is left out of the usage text: only the suite runs it.
const workerArg = "worker"

func workerMain(ctx context.Context, stdout, stderr io.Writer) int {
	redis.SetLogger(quietRedis{}) // the faults make failed dials on purpose
	return chaos.WorkerMain(ctx, os.Stdin, stdout, stderr)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
