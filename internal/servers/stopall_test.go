package servers_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/internal/servers"
)

// fakeServer's Stop waits until every fake of its group is inside Stop, so
// StopAll passes only if it stops them concurrently.
type fakeServer struct {
	all *sync.WaitGroup
	err error
}

func (f *fakeServer) Stop() error {
	f.all.Done()
	done := make(chan struct{})
	go func() { f.all.Wait(); close(done) }()
	select {
	case <-done:
		return f.err
	case <-time.After(5 * time.Second):
		return errors.New("not stopped concurrently with the others")
	}
}

func TestStopAllStopsConcurrentlyAndKeepsEveryError(t *testing.T) {
	errA, errB := errors.New("a failed"), errors.New("b failed")
	var all sync.WaitGroup
	all.Add(3)
	list := []*fakeServer{{all: &all, err: errA}, {all: &all}, {all: &all, err: errB}}
	err := servers.StopAll(list)
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	require.NotContains(t, err.Error(), "concurrently")
}

func TestStopAllOfNothing(t *testing.T) {
	require.NoError(t, servers.StopAll([]*fakeServer(nil)))
}
