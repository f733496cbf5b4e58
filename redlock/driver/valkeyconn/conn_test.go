package valkeyconn_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/driver/valkeyconn"
	"github.com/quorumlock/quorumlock/redlock/internal/drivertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dial(t *testing.T, addr, user, password string) driver.Conn {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, Username: user, Password: password, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	conn, err := valkeyconn.New(c)
	require.NoError(t, err)
	return conn
}

// The driver conformance suite, through valkey.
func TestDriverConformance(t *testing.T) { drivertest.Run(t, dial) }

func TestNew_RefusesANilClient(t *testing.T) {
	_, err := valkeyconn.New(nil)
	require.Error(t, err)
}
