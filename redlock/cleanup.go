package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/quorum"
)

// relArgs are a release's script keys and arguments, built once per round
// and shared read-only by its per-node calls.
type relArgs struct {
	keys []string
	args []any
}

func newRelArgs(key, value string) relArgs {
	return relArgs{keys: []string{key}, args: []any{value, releaseChannel(key)}}
}

// releaseOn runs the compare-and-delete script on node i.
func (c *Client) releaseOn(ctx context.Context, i int, a relArgs) (bool, error) {
	v, err := releaseScript.Run(ctx, c.nodes[i].sc, a.keys, a.args...).Int64()
	c.observe(i, err)
	return v == 1, err
}

// releaseOne releases one node with a detached, bounded context.
func (c *Client) releaseOne(key, value string, i int, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, newRelArgs(key, value)); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", key, "node", i, "err", err)
	}
}

// cleanup releases a failed attempt on every node, including those that did
// not answer: their SET may still land. It uses a context detached from the
// caller's (who may have been cancelled) bounded by the cleanup timeout. It
// waits only for the nodes that granted the key, so a failed attempt leaves
// nothing behind on responsive nodes when it returns, without waiting for
// unresponsive ones; those, and stragglers of the acquire round that
// granted after the release went out, are handled in the background.
func (c *Client) cleanup(key, value string, ttl time.Duration, replies []quorum.Reply[acqReply], acq *quorum.Round[acqReply]) {
	granted := make(map[int]bool, len(replies))
	for _, r := range replies {
		if acquired(r) {
			granted[r.Node] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	ra := newRelArgs(key, value)
	rel := quorum.Start(ctx, len(c.nodes), func(ctx context.Context, i int) (bool, error) {
		return c.releaseOn(ctx, i, ra)
	})
	if len(granted) > 0 {
		rel.Await(ctx, len(granted), func(r quorum.Reply[bool]) bool { return r.Err == nil && granted[r.Node] })
	}
	c.spawn(func() {
		defer cancel()
		rel.Wait()
		for _, r := range acq.Wait() {
			if acquired(r) {
				c.releaseOne(key, value, r.Node, ttl)
			}
		}
	})
}
