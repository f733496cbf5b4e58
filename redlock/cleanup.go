package redlock

import (
	"context"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// releaseOn runs the compare-and-delete call p (an attempt's release:
// see attempt.release) on node i. It reports whether the node held our value
// and deleted it. Where the key is not ours, the release leaves a
// tombstone for the attempt's ttl, the longest our own acquire could still
// hold the key if it landed after the release (see release.lua).
func (c *Client) releaseOn(ctx context.Context, i int, p *script.Release) (bool, error) {
	ok, err := p.Run(ctx, c.nodes[i].sn)
	c.observe(i, err)
	return ok, err
}

// releaseOne releases one node with a detached, bounded context.
func (c *Client) releaseOne(key string, i int, p *script.Release) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, p); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", key, "node", i, "err", err)
	}
}
