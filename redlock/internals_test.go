package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// Every look inside the package that the behaviour tests need, in one
// place: the node-side layout (script names, key names, the settings
// string) and a few readings of a Client's state. When that layout moves,
// this file follows and the tests do not. (The unit tests of the waker,
// the batcher and the verdict rules test those types themselves.)

// scriptName is the name of the script with sha, "?" for none of ours.
func scriptName(sha string) string { return script.NameOf(sha) }

// scriptNamed is the script called name.
func scriptNamed(name string) *redis.Script { return redis.NewScript(script.SourceOf(name)) }

// loadScript puts the script called name in rc's script cache, so that
// the next call of it is one EVALSHA.
func loadScript(t *testing.T, rc *redis.Client, name string) {
	t.Helper()
	require.NoError(t, scriptNamed(name).Load(context.Background(), rc).Err())
}

// The keys and channels quorumlock keeps on a node.
const (
	keyMarker  = script.MarkerKey  // the deployment's settings, once the node may vote
	keyPending = script.PendingKey // a quarantine in progress
	keyIdent   = script.IdentKey   // the server's identity
)

func keyFence(key string) string     { return script.FenceKey(key) }
func keyLine(key string) string      { return script.QueueKey(key) }
func keyNamed(key string) string     { return script.NamedKey(key) }
func chanReleased(key string) string { return script.ReleaseChannel(key) }

// chanWake is the channel on which releases tell c that they named one of
// its waiters.
func chanWake(c *Client) string { return script.WakeChannel(c.wake.id) }

// chanWakeID is chanWake for a Client known by its id only.
func chanWakeID(id string) string { return script.WakeChannel(id) }

// clientIDOf is the id of the Client that made waiter id (id itself
// when it has no Client part).
func clientIDOf(id string) string {
	if w, ok := script.ParseWaiterID(id); ok {
		return w.Client
	}
	return id
}

// persistentKeys are the keys a node keeps without an expiry.
func persistentKeys() []string { return script.DeploymentKeys }

// settingsString is the settings string of a deployment of n nodes.
func settingsString(n int, maxTTL time.Duration, factor float64) string {
	return settings{nodes: n, maxTTL: maxTTL, factor: factor}.String()
}

// settingsPrefix starts every settings string.
const settingsPrefix = settingsVersion

// deploymentOf is the settings string c runs with.
func deploymentOf(c *Client) string { return c.dep.marker }

// quarantineOf is the quarantine of c's deployment.
func quarantineOf(c *Client) time.Duration { return c.dep.quarantine() }

// fenceKeepOf is how long c's nodes keep a fence after a lease of ttl.
func fenceKeepOf(c *Client, ttl time.Duration) time.Duration { return c.dep.fenceKeep(ttl) }

// maxTTLOf and factorOf are c's WithMaxTTL and WithDriftFactor.
func maxTTLOf(c *Client) time.Duration { return c.cfg.maxTTL }
func factorOf(c *Client) float64       { return c.cfg.factor }

// quorumOf is the number of nodes c needs.
func quorumOf(c *Client) int { return c.quorum }

// valueOf is the value l holds the key with.
func valueOf(l *Lease) string { return l.value }

// verifiedOn reports whether c verified node i's identity.
func verifiedOn(c *Client, i int) bool { return c.verified(i) }

// provenOn is the identity c's node i was verified with ("" for none).
func provenOn(c *Client, i int) string { return c.ident.proven()[i] }

// setLineLifetime sets how long c's Lock calls stay in a key's line on a
// node without trying again (New floors it at 10 s). Before any call.
func setLineLifetime(c *Client, d time.Duration) { c.line = d }

// setRoundTime makes c's acquire rounds look as if they took d, which
// sets the length of the reservations its releases make.
func setRoundTime(c *Client, d time.Duration) { c.roundNs.Store(int64(d)) }

// roundsInFlight is how many of c's acquisition rounds still have calls
// out: an attempt holds its slot until every call of its round returned
// (leave and abandon give it back), whether it won or not. A failed
// attempt's cleanup starts only after that, so it is not counted.
func roundsInFlight(c *Client) int { return len(c.rounds) }

// settled waits until c's background work (a round's stragglers and
// cleanups, admissions) is done, and fails t when it is not within d.
func settled(t *testing.T, c *Client, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		c.bg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("the client's background work (stragglers, cleanups, admissions) did not end within %v", d)
	}
}

// startQuarantine starts node rc's quarantine under c's settings, as c's
// admission does.
func startQuarantine(t *testing.T, rc *redis.Client, c *Client) {
	t.Helper()
	_, err := script.NewNode(redisconn.New(rc), time.Second).Pending(context.Background(), script.PendingArgs{ID: newValue(),
		Settings: c.dep.marker, Quarantine: c.dep.quarantine(), TTL: c.dep.pendingTTL(), Replace: true})
	require.NoError(t, err)
}

// putPending writes a quarantine in progress on rc as another client
// with settings sett would have started it, stamped at time 0.
func putPending(t *testing.T, rc *redis.Client, sett string) {
	t.Helper()
	require.NoError(t, rc.HSet(context.Background(), script.PendingKey, "id", "x", "stamp", "0", "settings", sett, "quarantine", "1").Err())
}

// subscriptionLive reports whether c's subscription to key's release
// notices was confirmed by a majority of nodes.
func subscriptionLive(c *Client, key string) bool {
	c.wake.mu.Lock()
	defer c.wake.mu.Unlock()
	kw := c.wake.waiters[key]
	return kw != nil && !kw.liveSince.IsZero()
}

// waitersOf is how many of c's Lock calls wait for key's release notices.
func waitersOf(c *Client, key string) int {
	c.wake.mu.Lock()
	defer c.wake.mu.Unlock()
	if kw := c.wake.waiters[key]; kw != nil {
		return len(kw.set)
	}
	return 0
}

// gateRefs is how many of c's Lock calls hold or wait at key's gate.
func gateRefs(c *Client, key string) int {
	c.gates.mu.Lock()
	defer c.gates.mu.Unlock()
	if gt := c.gates.m[key]; gt != nil {
		return gt.refs
	}
	return 0
}

// missedLast reports whether node i missed the deadline of c's last call
// to it.
func missedLast(c *Client, i int) bool { return c.missedLast(i) }

// handOffWaiter is a waiter id that takes hand-offs, of a Client with
// id cid, for a call placed in line at place (µs) with a ttl of ttlMs.
func handOffWaiter(cid string, place, ttlMs int64) string {
	return script.WaiterID{Client: cid, Nonce: "x", Place: place, TTL: time.Duration(ttlMs) * time.Millisecond}.String()
}

// placeOf is the place in line a hand-off waiter id carries.
func placeOf(t *testing.T, id string) int64 {
	t.Helper()
	w, ok := script.ParseWaiterID(id)
	require.True(t, ok && w.TTL > 0, "%q is no hand-off waiter id", id)
	return w.Place
}

// takesHandOffs reports whether waiter id offers to take the key inside
// a release: it carries a place and a ttl.
func takesHandOffs(id string) bool {
	w, ok := script.ParseWaiterID(id)
	return ok && w.TTL > 0
}

// handedTo reports whether a key's value is a waiter id a release handed
// the key to (a lease's own value is no such id).
func handedTo(v string) bool { return takesHandOffs(v) }

// isGiveBack reports whether c is a Lock call giving handed keys back
// under a new id (a release with the old id, the new id and its place).
func isGiveBack(c *call) bool { return c.Script == "release" && len(c.Args) == 10 }

// handOffNotice is what a release publishes on a Client's channel when
// it handed key to waiter id, on the server whose identity is server.
// The script package reads notices (ParseNotice) but builds none (only
// release.lua does), so the test writes this one; t fails if
// ParseNotice does not read it back as that hand-off.
func handOffNotice(t *testing.T, id, server, key string) string {
	t.Helper()
	p := "!" + id + " " + server + "|" + key
	n, ok := script.ParseNotice(chanWakeID("x"), p)
	require.True(t, ok, "ParseNotice does not read %q", p)
	require.Equal(t, script.Notice{Key: key, Names: id, Handed: true, Server: server}, n, "ParseNotice reads %q otherwise", p)
	return p
}

// wakeNotice reads payload, heard on Client channel ch, as a release's
// notice that did not hand the key over.
func wakeNotice(t *testing.T, ch, payload string) script.Notice {
	t.Helper()
	n, ok := script.ParseNotice(ch, payload)
	require.True(t, ok, "%q on %q is no notice", payload, ch)
	return n
}

// bootstrapWindowOf is how long c's Bootstrap may take to claim every node.
func bootstrapWindowOf(c *Client) time.Duration { return c.dep.bootstrapWindow() }

// isNoScript reports whether err is a node's NOSCRIPT answer to an
// EVALSHA, which the Client sends again as EVAL.
func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// renewedAny reports whether c's renewer keeps any lease.
func renewedAny(c *Client) bool {
	c.renew.mu.Lock()
	defer c.renew.mu.Unlock()
	return len(c.renew.kept) > 0
}

// renewed reports whether c's renewer keeps l.
func renewed(c *Client, l *Lease) bool {
	c.renew.mu.Lock()
	defer c.renew.mu.Unlock()
	return c.renew.kept[l] != nil
}
