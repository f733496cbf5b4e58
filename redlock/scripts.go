package redlock

import (
	"context"
	_ "embed"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The scripts run through EVALSHA; go-redis falls back to EVAL when a node
// answers NOSCRIPT (after a restart emptied its script cache).
var (
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/commit.lua
	commitSrc string
	//go:embed lua/pending.lua
	pendingSrc string
	//go:embed lua/admit.lua
	admitSrc string
	//go:embed lua/bootstrap.lua
	bootstrapSrc string
	//go:embed lua/state.lua
	stateSrc string
	//go:embed lua/ident.lua
	identSrc string

	acquireScript   = redis.NewScript(acquireSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	extendScript    = redis.NewScript(extendSrc)
	commitScript    = redis.NewScript(commitSrc)
	pendingScript   = redis.NewScript(pendingSrc)
	admitScript     = redis.NewScript(admitSrc)
	bootstrapScript = redis.NewScript(bootstrapSrc)
	stateScript     = redis.NewScript(stateSrc)
	identScript     = redis.NewScript(identSrc)
)

// Key layout, known to this file only. The lock itself lives under the
// caller's key exactly as given, so that quorumlock, redsync and
// node-redlock locks on the same key exclude each other during a
// migration. Everything else quorumlock keeps on a node lives under
// reservedPrefix, which no caller's key may start with (check refuses
// it), so a caller's key can never be one of ours.
const (
	reservedPrefix = "quorumlock:"
	markerKey      = reservedPrefix + "admitted" // per node: the deployment's settings, once the node may vote
	pendingKey     = reservedPrefix + "pending"  // per node: a quarantine in progress
	identKey       = reservedPrefix + "node"     // per server: its random identity (see identity.go)
	fencePrefix    = reservedPrefix + "fence:"   // + lock key: the key's fence value
	tombPrefix     = reservedPrefix + "gone:"    // + lock value: an attempt given up on this node
	queuePrefix    = reservedPrefix + "queue:"   // + lock key: Lock calls waiting for the key, in order
	seenPrefix     = reservedPrefix + "seen:"    // + lock key: when the node last saw each call in the key's line
	namedPrefix    = reservedPrefix + "named:"   // + lock key: the waiters a release named, for a moment
	channelPrefix  = reservedPrefix + "released:"
	wakePrefix     = reservedPrefix + "wake:" // + a Client's id: release notices that name its waiters
)

// deploymentKeys are the keys quorumlock keeps on a node without an expiry:
// a constant number per node, however many keys are locked. Everything
// else it writes expires (docs/fencing.md, "Fences expire"), so nodes run
// with maxmemory-policy noeviction never fill up with lock state.
var deploymentKeys = []string{markerKey, identKey}

func fenceKey(key string) string       { return fencePrefix + key }
func tombKey(value string) string      { return tombPrefix + value }
func queueKey(key string) string       { return queuePrefix + key }
func seenKey(key string) string        { return seenPrefix + key }
func namedKey(key string) string       { return namedPrefix + key }
func releaseChannel(key string) string { return channelPrefix + key }

// reserved reports whether key is in quorumlock's own namespace.
func reserved(key string) bool { return strings.HasPrefix(key, reservedPrefix) }

// prepared is one script call with its arguments, built once per round and
// sent to every node of it (the round's goroutines only read it): a round
// then costs the nodes' clients no argument building of their own, which
// was a third of a Lock+Release's allocations.
type prepared struct {
	script *redis.Script
	nkeys  int
	cmd    []any // EVALSHA sha numkeys keys... args...
}

// prepare builds a call of s. Keys and arguments are given already boxed,
// so that a value used by several calls (a lock value, a ttl) is boxed
// once.
func prepare(s *redis.Script, keys []any, args ...any) *prepared {
	cmd := make([]any, 0, 3+len(keys)+len(args))
	cmd = append(cmd, "evalsha", s.Hash(), len(keys))
	cmd = append(cmd, keys...)
	cmd = append(cmd, args...)
	return &prepared{script: s, nkeys: len(keys), cmd: cmd}
}

// split returns the keys and arguments for the Script API (EVAL after a
// NOSCRIPT, wrapped Scripters), which wants them apart.
func (p *prepared) split() ([]string, []any) {
	keys := make([]string, p.nkeys)
	for i := range keys {
		keys[i] = p.cmd[3+i].(string)
	}
	return keys, p.cmd[3+p.nkeys:]
}

// run sends p to node i: one EVALSHA with the prebuilt arguments, and the
// script's source when the node answers NOSCRIPT (a restart emptied its
// script cache).
func (c *Client) run(ctx context.Context, i int, p *prepared) *redis.Cmd {
	nd := c.nodes[i]
	cmd := nd.batch.do(ctx, p.cmd)
	if err := cmd.Err(); err == nil || !isNoScript(err) {
		return cmd
	}
	keys, args := p.split()
	return p.script.Eval(ctx, nd.uc, keys, args...)
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || strings.HasPrefix(err.Error(), "NOSCRIPT")
}
