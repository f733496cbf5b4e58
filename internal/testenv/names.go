package testenv

import "github.com/quorumlock/quorumlock/internal/servers"

// The starters live in package servers, which programs may import without
// linking package testing; the helpers here keep the names their callers
// use for what the starters define.

// RedisServer is the node behind a RedisNode: a *servers.RedisProcess, or a
// *servers.RedisContainer with QUORUMLOCK_TEST_BACKEND=docker.
type RedisServer = servers.RedisServer

// Persistence selects how a node keeps data across a restart
// (WithPersistence).
type Persistence = servers.Persistence

// Persistence values; see servers.PersistenceNone and
// servers.PersistenceAOFAlways.
const (
	PersistenceNone      = servers.PersistenceNone
	PersistenceAOFAlways = servers.PersistenceAOFAlways
)
