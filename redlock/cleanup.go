package redlock

import (
	"context"
)

// releaseOn runs the compare-and-delete script p (an attempt's release:
// see newAttempt) on node i. It reports whether the node held our value
// and deleted it. Where the key is not ours, the release leaves a
// tombstone for the attempt's ttl, the longest our own acquire could still
// hold the key if it landed after the release (see release.lua).
func (c *Client) releaseOn(ctx context.Context, i int, p *prepared) (bool, error) {
	v, err := c.run(ctx, i, p).Int64()
	c.observe(i, err)
	return v == 1, err
}

// releaseOne releases one node with a detached, bounded context.
func (c *Client) releaseOne(key string, i int, p *prepared) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, p); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", key, "node", i, "err", err)
	}
}
