package script

import "strings"

// Key layout. The lock itself lives under the caller's key exactly as
// given, so that quorumlock, redsync and node-redlock locks on the same
// key exclude each other during a migration. Everything else quorumlock
// keeps on a node lives under Prefix, which no caller's key may start
// with (redlock refuses it), so a caller's key can never be one of ours.
const (
	Prefix     = "quorumlock:"
	MarkerKey  = Prefix + "admitted" // per node: the deployment's settings, once the node may vote
	PendingKey = Prefix + "pending"  // per node: a quarantine in progress
	IdentKey   = Prefix + "node"     // per server: its random identity
	TraceKey   = Prefix + "moved"    // per node: the record of the change that marked it (ChangeRecord)

	fencePrefix   = Prefix + "fence:"    // + lock key: the key's fence value
	metaPrefix    = Prefix + "meta:"     // + lock key: its holder's metadata (WithMetadata), as owner "\n" metadata
	tombPrefix    = Prefix + "gone:"     // + lock value: an attempt given up on this node
	queuePrefix   = Prefix + "queue:"    // + lock key: Lock calls waiting for the key, in order
	seenPrefix    = Prefix + "seen:"     // + lock key: when the node last saw each call in the key's line
	namedPrefix   = Prefix + "named:"    // + lock key: the waiters a release named, for a moment
	linedPrefix   = Prefix + "lined:"    // + lock key: set while the key may have a line (see LinedKey)
	channelPrefix = Prefix + "released:" // + lock key: release notices for every waiter of the key
	wakePrefix    = Prefix + "wake:"     // + a Client's id: release notices that name its waiters
)

// DeploymentKeys are the keys quorumlock keeps on a node without an
// expiry: a constant number per node, however many keys are locked.
// Everything else it writes expires (docs/protocol.md, "Fences expire"), so
// nodes run with maxmemory-policy noeviction never fill up with lock state.
var DeploymentKeys = []string{MarkerKey, IdentKey, TraceKey}

// FenceKey is where a node keeps key's fence value.
func FenceKey(key string) string { return fencePrefix + key }

// MetaKey is where a node keeps the metadata of key's holder: the
// holder's value (its lock value or waiter id), a newline, the metadata.
// It is written only where the lock key holds that value, with the lock
// key's remaining life, and follows it: extends renew both, a release
// deletes both. Its owner part makes a leftover harmless: metadata counts
// only while the lock key holds its owner (see Metadata).
func MetaKey(key string) string { return metaPrefix + key }

// Metadata returns the metadata in raw, a MetaKey's value, if it belongs
// to owner (the value the lock key holds); false for none or another's.
func Metadata(raw, owner string) (string, bool) {
	own, md, ok := strings.Cut(raw, "\n")
	if !ok || owner == "" || own != owner {
		return "", false
	}
	return md, true
}

// TombKey is the tombstone of an attempt that gave value up on a node.
func TombKey(value string) string { return tombPrefix + value }

// QueueKey is key's line of waiting Lock calls, scored by place.
func QueueKey(key string) string { return queuePrefix + key }

// SeenKey holds when a node last saw each call in key's line.
func SeenKey(key string) string { return seenPrefix + key }

// LinedKey marks a key that may have a line of waiting Lock calls on a
// node: every script that puts a call in the line sets it with the line's
// expiry. Where it is absent the line is empty, and the acquire and release
// scripts, which read it in the MGET they make anyway, skip the line.
func LinedKey(key string) string { return linedPrefix + key }

// NamedKey is the reservation a release of key leaves for the waiters it
// named.
func NamedKey(key string) string { return namedPrefix + key }

// ReleaseChannel is where releases of key tell every waiter of the key.
func ReleaseChannel(key string) string { return channelPrefix + key }

// WakeChannel is where releases tell the waiters of the Client whose id
// is client (see WaiterID).
func WakeChannel(client string) string { return wakePrefix + client }

// Reserved reports whether key is in quorumlock's own namespace.
func Reserved(key string) bool { return strings.HasPrefix(key, Prefix) }
