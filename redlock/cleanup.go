package redlock

import (
	"context"
	"time"
)

// relArgs are a release's script keys and arguments, built once per round
// and shared read-only by its per-node calls.
type relArgs struct {
	keys []string
	args []any
}

// newRelArgs builds a release of value on key. Where the key is not ours,
// the release leaves a tombstone for ttl, the longest our own acquire could
// still hold the key if it landed after the release (see release.lua).
func newRelArgs(key, value string, ttl time.Duration) relArgs {
	return relArgs{keys: []string{key, tombKey(value)}, args: []any{value, releaseChannel(key), ttl.Milliseconds()}}
}

// releaseOn runs the compare-and-delete script on node i. It reports
// whether the node held our value and deleted it.
func (c *Client) releaseOn(ctx context.Context, i int, a relArgs) (bool, error) {
	v, err := releaseScript.Run(ctx, c.nodes[i].sc, a.keys, a.args...).Int64()
	c.observe(i, err)
	return v == 1, err
}

// releaseOne releases one node with a detached, bounded context.
func (c *Client) releaseOne(key, value string, i int, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, newRelArgs(key, value, ttl)); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", key, "node", i, "err", err)
	}
}
