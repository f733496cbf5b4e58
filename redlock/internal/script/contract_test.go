package script_test

import (
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/script/contract"
)

// The script contract: every case (package contract) runs against a real
// redis-server running the Lua, so that a change to a script that breaks
// its contract fails here. drivertest runs the same cases through each
// driver adapter.

// TestScriptContractRedis runs the contract against redis-server, through
// go-redis.
func TestScriptContractRedis(t *testing.T) {
	rc := testenv.Redis(t).Client(t)
	contract.Run(t, redisconn.New(rc))
}

// TestScriptContractCoversEveryScript fails when a script has no case, so
// a new script cannot skip the contract.
func TestScriptContractCoversEveryScript(t *testing.T) {
	if missing := contract.Uncovered(); len(missing) > 0 {
		t.Errorf("scripts without a contract case: %v", missing)
	}
}
