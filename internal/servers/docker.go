package servers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// ErrDockerUnavailable is wrapped by the errors of the container starters
// when the docker command is missing, no engine answers, or an image is
// neither present nor pullable.
var ErrDockerUnavailable = errors.New("servers: docker unavailable")

// Image variables shared with compose/redlock-5.yml. When unset, the image
// `make images` builds is used if present, else the official one.
const (
	RedisImageEnv    = "QUORUMLOCK_REDIS_IMAGE"
	PostgresImageEnv = "QUORUMLOCK_POSTGRES_IMAGE"
)

var (
	redisImages    = [2]string{"quorumlock/redis:7", "redis:7"}
	postgresImages = [2]string{"quorumlock/postgres:15", "postgres:15"}
)

// Labels on every container this package starts. The owner label lets a
// later run remove the containers of a process that died before its
// cleanups ran (containers, unlike child processes, get no parent-death
// signal). The names predate this package and scripts filter on them.
const (
	labelManaged = "org.quorumlock.testenv"
	labelOwner   = "org.quorumlock.testenv.owner"
)

// dockerTimeout bounds one docker command whose caller gave no deadline, so
// that an engine that stopped answering cannot hang a test until the global
// test timeout.
const dockerTimeout = 2 * time.Minute

// dockerError is a docker command that failed, with what it said on stderr:
// the engine's reasons ("port is already allocated", "No such container")
// arrive only there.
type dockerError struct {
	args   []string
	stderr string
	err    error
}

func (e *dockerError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = "(no output)"
	}
	return fmt.Sprintf("docker %s: %v: %s", strings.Join(e.args, " "), e.err, msg)
}

func (e *dockerError) Unwrap() error { return e.err }

// dockerCmd runs the docker command-line tool (which honours DOCKER_HOST)
// and returns its standard output.
func dockerCmd(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx, dockerTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A plugin the CLI started could keep the pipes open after the CLI was
	// killed for its deadline; do not wait for it.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return stdout.String(), &dockerError{args: args, stderr: stderr.String(), err: err}
	}
	return stdout.String(), nil
}

// dockerSays reports whether err is a failed docker command whose message
// contains text.
func dockerSays(err error, text string) bool {
	var de *dockerError
	return errors.As(err, &de) && strings.Contains(de.stderr, text)
}

var engine struct {
	once sync.Once
	err  error
}

// dockerReady checks once per process that the docker command exists and
// an engine answers, and removes containers orphaned by earlier runs.
func dockerReady() error {
	engine.once.Do(func() {
		if _, err := exec.LookPath("docker"); err != nil {
			engine.err = fmt.Errorf("%w: the docker command is not installed", ErrDockerUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := dockerCmd(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
			engine.err = fmt.Errorf("%w: no engine answers: %v", ErrDockerUnavailable, err)
			return
		}
		reapOrphans()
	})
	return engine.err
}

// resolveImage picks the image for a server kind: the variable if set, else
// the locally built image if present, else the official one. An image that
// is not present is pulled; a failed pull names `make images`.
func resolveImage(envVar string, candidates [2]string) (string, error) {
	ctx := context.Background()
	image := os.Getenv(envVar)
	if image == "" {
		image = candidates[1]
		if imagePresent(ctx, candidates[0]) {
			image = candidates[0]
		}
	}
	if imagePresent(ctx, image) {
		return image, nil
	}
	pull, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := dockerCmd(pull, "pull", "--quiet", image); err != nil {
		return "", fmt.Errorf("%w: image %s is not present and could not be pulled (without registry access, run `make images`; %s selects another image): %v",
			ErrDockerUnavailable, image, envVar, err)
	}
	return image, nil
}

func imagePresent(ctx context.Context, image string) bool {
	_, err := dockerCmd(ctx, "image", "inspect", "--format", "{{.Id}}", image)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
