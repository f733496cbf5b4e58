package redlock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/drivertest"
	"github.com/quorumlock/quorumlock/redlock/internal/redisconn"
)

// The driver conformance suite on go-redis, the driver New runs on, so
// that the adapters' runs of it have a baseline that passes.
func TestDriverConformance_GoRedis(t *testing.T) {
	drivertest.Run(t, func(t *testing.T, addr, user, password string) driver.Conn {
		rc := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: password})
		t.Cleanup(func() { _ = rc.Close() })
		return redisconn.New(rc)
	})
}
