package rueidisconn_test

import (
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/driver/rueidisconn"
	"github.com/quorumlock/quorumlock/redlock/internal/drivertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func dial(t *testing.T, addr, user, password string) driver.Conn {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, Username: user, Password: password, DisableCache: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	conn, err := rueidisconn.New(c)
	require.NoError(t, err)
	return conn
}

// The driver conformance suite, through rueidis.
func TestDriverConformance(t *testing.T) { drivertest.Run(t, dial) }

func TestNew_RefusesANilClient(t *testing.T) {
	_, err := rueidisconn.New(nil)
	require.Error(t, err)
}
