package redlock

import (
	"fmt"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The fencing token of a lease: computed from what the acquire round read
// and committed to a quorum before the lease is handed out, so that every
// later holder of the key gets a larger one (docs/protocol.md proves it).
// This file is the Go home of that rule (the attempt's commit round,
// attempt.commit, applies it); commit.lua holds its node side.

// fenceToken is the token rule (script.Token, shared with the model
// checker; docs/protocol.md, "The protocol"): one
// more than the largest fence the acquire round read, and at least the
// largest server time it read, in µs. The fences make tokens increase
// while the nodes keep their data; the time floor keeps them increasing
// across a node that lost its fence (a restart without persistence, or a
// fence that expired). Every node that granted or found the key held read
// its fence and clock, and each counts. It fails when the token would not
// fit a PostgreSQL bigint.
func fenceToken(key string, replies []quorum.Reply[script.AcquireReply]) (uint64, error) {
	rs := make([]script.AcquireReply, 0, len(replies))
	for _, r := range replies {
		if r.Err == nil {
			rs = append(rs, r.Val)
		}
	}
	token, maxFence, floor, ok := script.Token(rs)
	if !ok {
		return 0, fmt.Errorf("redlock: fence for %s would pass the largest PostgreSQL bigint (fence %d, server time %d µs)", keyText(key), maxFence, floor)
	}
	return token, nil
}

const maxToken = script.MaxToken
