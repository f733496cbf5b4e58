package redlock

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The token rule: one more than the largest fence read, at least the
// largest server time read, over the nodes that granted or found the key
// held; nothing past a PostgreSQL bigint.
func TestFenceToken_Rule(t *testing.T) {
	read := func(st script.AcquireStatus, fence, us uint64) quorum.Reply[script.AcquireReply] {
		return quorum.Reply[script.AcquireReply]{Val: script.AcquireReply{Status: st, Fence: fence, TimeUs: us}}
	}
	for _, tc := range []struct {
		name    string
		replies []quorum.Reply[script.AcquireReply]
		want    uint64
		err     bool
	}{
		{"fences above the clocks", []quorum.Reply[script.AcquireReply]{read(script.Granted, 50, 10), read(script.Held, 70, 20)}, 71, false},
		{"a clock above the fences", []quorum.Reply[script.AcquireReply]{read(script.Granted, 50, 10), read(script.Granted, 3, 900)}, 900, false},
		{"refusals and errors read nothing", []quorum.Reply[script.AcquireReply]{read(script.Granted, 5, 6),
			read(script.Unadmitted, 1000, 1000), {Err: errors.New("down"), Val: script.AcquireReply{Fence: 2000}}}, 6, false},
		{"the largest bigint fits", []quorum.Reply[script.AcquireReply]{read(script.Granted, maxToken-1, 1)}, maxToken, false},
		{"one past it does not", []quorum.Reply[script.AcquireReply]{read(script.Granted, maxToken, 1)}, 0, true},
		{"nor a clock past it", []quorum.Reply[script.AcquireReply]{read(script.Granted, 1, maxToken+1)}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fenceToken("k", tc.replies)
			if tc.err {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}
