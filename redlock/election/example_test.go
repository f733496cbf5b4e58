package election_test

import (
	"context"
	"log"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/election"
)

// One replica of a service leads at a time; the others wait their turn.
// The example needs five running nodes, so it is only compiled.
func Example() {
	ctx := context.Background()
	c, err := redlock.Open(ctx, redlock.Config{Nodes: []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	e, err := election.New(c, "billing:leader", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		l, err := e.Campaign(ctx, "billing-7f9c:8080") // waits until this replica leads
		if err != nil {
			log.Fatal(err)
		}
		lead(ctx, l.FencingToken(), l.Done()) // returns when the leadership ends
		_ = l.Release(ctx)                    // resign, if it has not ended already
	}
}

// lead does the leader's work, writing with term as its fencing token,
// and stops at once when done closes.
func lead(ctx context.Context, term uint64, done <-chan struct{}) {
	select {
	case <-done:
	case <-ctx.Done():
	}
}
