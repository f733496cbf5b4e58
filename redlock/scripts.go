package redlock

import (
	_ "embed"

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
	//go:embed lua/record.lua
	recordSrc string

	acquireScript = redis.NewScript(acquireSrc)
	releaseScript = redis.NewScript(releaseSrc)
	extendScript  = redis.NewScript(extendSrc)
	commitScript  = redis.NewScript(commitSrc)
	pendingScript = redis.NewScript(pendingSrc)
	admitScript   = redis.NewScript(admitSrc)
	recordScript  = redis.NewScript(recordSrc)
)

// Names of the keys quorumlock keeps next to a lock. The lock itself lives
// under the caller's key exactly as given, so that quorumlock, redsync and
// node-redlock locks on the same key exclude each other during a migration.
// They are exported for tools that inspect nodes (quorumlock status).
const (
	AdmittedKey = "quorumlock:admitted" // per node: set once the node may vote
	PendingKey  = "quorumlock:pending"  // per node: a quarantine in progress
	MembersKey  = "quorumlock:members"  // per node: hash of admitted node names
)

const (
	markerKey  = AdmittedKey
	pendingKey = PendingKey
	membersKey = MembersKey
)

// FenceKey returns the name of the key that holds the fence value of the
// lock key on every node.
func FenceKey(key string) string { return key + ":quorumlock:fence" }

// ReleaseChannel returns the Pub/Sub channel on which releases of key are
// announced.
func ReleaseChannel(key string) string { return channelPrefix + key }

func fenceKey(key string) string       { return FenceKey(key) }
func releaseChannel(key string) string { return ReleaseChannel(key) }
