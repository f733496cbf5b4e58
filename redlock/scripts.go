package redlock

import (
	_ "embed"
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

	acquireScript   = redis.NewScript(acquireSrc)
	releaseScript   = redis.NewScript(releaseSrc)
	extendScript    = redis.NewScript(extendSrc)
	commitScript    = redis.NewScript(commitSrc)
	pendingScript   = redis.NewScript(pendingSrc)
	admitScript     = redis.NewScript(admitSrc)
	bootstrapScript = redis.NewScript(bootstrapSrc)
	stateScript     = redis.NewScript(stateSrc)
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
	fencePrefix    = reservedPrefix + "fence:"   // + lock key: the key's fence value
	tombPrefix     = reservedPrefix + "gone:"    // + lock value: an attempt given up on this node
	channelPrefix  = reservedPrefix + "released:"
)

func fenceKey(key string) string       { return fencePrefix + key }
func tombKey(value string) string      { return tombPrefix + value }
func releaseChannel(key string) string { return channelPrefix + key }

// reserved reports whether key is in quorumlock's own namespace.
func reserved(key string) bool { return strings.HasPrefix(key, reservedPrefix) }
