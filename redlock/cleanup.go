package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// releaseOn runs the compare-and-delete call p (an attempt's release:
// see attempt.release) on node i. It reports whether the node held our value
// and deleted it. Where the key is not ours, the release leaves a
// tombstone for the attempt's ttl, the longest our own acquire could still
// hold the key if it landed after the release (see release.lua).
//
// Every release call goes through here: a lease's Release, a failed
// attempt's cleanup, a Lock call's line-leave and give-back. A node that
// seems down (it missed its last deadline or could not be reached) gets
// the down wait for a call of ttl (the node timeout, at least 100 ms)
// instead of ctx's longer bound: waiting the cleanup timeout for it kept a
// process from exiting (Close waits for the calls) long after it knew its
// outcome, and a release it misses costs that node's key for one ttl,
// never a second holder (docs/fencing.md, "A release beats a late
// acquire").
func (c *Client) releaseOn(ctx context.Context, i int, p *script.Release, ttl time.Duration) (bool, error) {
	if c.seemsDown(i) {
		dctx, cancel := context.WithTimeout(ctx, c.downWait(ttl))
		defer cancel()
		ctx = dctx
	}
	ok, err := p.Run(ctx, c.nodes[i].sn)
	c.observe(i, err)
	return ok, err
}

// releaseOne releases one node with a detached context, bounded by the
// cleanup timeout (or the down wait: see releaseOn).
func (c *Client) releaseOne(key string, i int, p *script.Release, ttl time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.cleanup)
	defer cancel()
	if _, err := c.releaseOn(ctx, i, p, ttl); err != nil {
		c.cfg.logger.Warn("redlock: release of a straggler failed", "key", keyText(key), "node", i, errAttr(err))
	}
}
