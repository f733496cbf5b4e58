package servers

import (
	"context"
	"fmt"
	"os"
)

// The images of the consensus stores, as images/build.sh tags them. There
// is no official fallback: their layout differs from what the suite runs.
const (
	localEtcdImage      = "quorumlock/etcd:3.4"
	localZooKeeperImage = "quorumlock/zookeeper:3.8"
)

// EtcdImage returns the image etcd containers run: QUORUMLOCK_ETCD_IMAGE,
// else the one `make images` builds. An image that is not present is
// pulled; a failed pull names `make images`.
func EtcdImage() (string, error) {
	if err := dockerReady(); err != nil {
		return "", err
	}
	return resolveImage("QUORUMLOCK_ETCD_IMAGE", [2]string{localEtcdImage, localEtcdImage})
}

// ZooKeeperImage returns the image ZooKeeper containers run:
// QUORUMLOCK_ZOOKEEPER_IMAGE, else the one `make images` builds. Its
// command `zk-run CONFIG` starts a server in the foreground.
func ZooKeeperImage() (string, error) {
	if err := dockerReady(); err != nil {
		return "", err
	}
	return resolveImage("QUORUMLOCK_ZOOKEEPER_IMAGE", [2]string{localZooKeeperImage, localZooKeeperImage})
}

// HostContainerSpec is a server that runs in a container on the host's
// network, as the same process would run on the host: the same command,
// ports and files (bind-mounted at the same paths), as this process's user.
type HostContainerSpec struct {
	What  string // for messages and the container's name: "etcd", "zookeeper"
	Image string
	Cmd   []string
	Env   []string
	Binds []string // host:container[:ro]
}

// HostContainer is a running HostContainerSpec. Its methods are safe for
// concurrent use.
type HostContainer struct{ c *container }

// StartHostContainer starts spec. Ready is not waited for: the caller
// knows when its server serves.
func StartHostContainer(ctx context.Context, spec HostContainerSpec) (*HostContainer, error) {
	if err := dockerReady(); err != nil {
		return nil, err
	}
	c, err := runContainer(ctx, containerSpec{what: spec.What, image: spec.Image, env: spec.Env, binds: spec.Binds,
		hostNet: true, cmdFor: func(int) []string { return spec.Cmd },
		user: fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())})
	if err != nil {
		return nil, err
	}
	return &HostContainer{c: c}, nil
}

// Kill sends SIGKILL and waits until the container stopped.
func (h *HostContainer) Kill() error { return h.c.kill() }

// Pause freezes the container (docker pause); Resume undoes it.
func (h *HostContainer) Pause() error  { return h.c.pause() }
func (h *HostContainer) Resume() error { return h.c.resume() }

// Restart kills the container if it runs and starts it again, keeping its
// filesystem, then polls ready (nil: returns once started).
func (h *HostContainer) Restart(ctx context.Context, ready func(context.Context) error) error {
	if ready == nil {
		ready = func(context.Context) error { return nil }
	}
	return h.c.restart(ctx, ready)
}

// Running reports whether the container's process runs (paused counts).
func (h *HostContainer) Running() bool {
	st, err := h.c.inspect()
	return err == nil && st.State.Running
}

// Stop removes the container; it is idempotent.
func (h *HostContainer) Stop() error { return h.c.stop() }

// Logs returns the end of the container's output.
func (h *HostContainer) Logs() string { return h.c.logTail() }
