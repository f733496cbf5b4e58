// Package drivertest is the conformance suite of a driver adapter
// (package redlock/driver): the scripts' contract cases (package
// contract) through the driver, and redlock's behaviour through the
// public API on five real redis-server nodes whose every call goes
// through the driver. Package redlock's tests run it on go-redis; each
// adapter module's tests run it on its driver. It imports testing: tests
// only.
package drivertest

import (
	"testing"

	"github.com/quorumlock/quorumlock/internal/testenv"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script/contract"
)

// Dial returns a Conn to the redis-server at addr (host:port), logging in
// as user with password when user is not "" (the default user
// otherwise). It fails t if it cannot, and closes the Conn's client when t
// ends.
type Dial func(t *testing.T, addr, user, password string) driver.Conn

// Run runs the whole suite through dial, each part a subtest. It starts
// its own redis-servers (internal/testenv): without redis-server it skips,
// and with CI=true it fails.
func Run(t *testing.T, dial Dial) {
	t.Run("Contract", func(t *testing.T) { Contract(t, dial) })
	t.Run("Subscription", func(t *testing.T) { Subscription(t, dial) })
	t.Run("Behaviour", func(t *testing.T) { Behaviour(t, dial) })
}

// Contract runs every contract case of the node-side scripts through a
// Conn of dial, on one redis-server.
func Contract(t *testing.T, dial Dial) {
	n := testenv.Redis(t)
	contract.Run(t, dial(t, n.Addr(), "", ""))
}
