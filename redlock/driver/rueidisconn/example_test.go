package rueidisconn_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/rueidis"

	"github.com/quorumlock/quorumlock/redlock"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/driver/rueidisconn"
)

// A Client over five rueidis clients, one per node. It needs the nodes
// running, so it has no Output line and go test only compiles it.
func Example() {
	ctx := context.Background()
	addrs := []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003", "127.0.0.1:7004", "127.0.0.1:7005"}
	conns := make([]driver.Conn, len(addrs))
	for i, a := range addrs {
		// One standalone client per node. quorumlock never uses
		// client-side caching, so it is off.
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{a}, DisableCache: true})
		if err != nil {
			log.Fatal(err)
		}
		defer rc.Close() // after the Client's Close, which runs first
		if conns[i], err = rueidisconn.New(rc); err != nil {
			log.Fatal(err)
		}
	}
	c, err := redlock.NewFromConns(conns, redlock.WithFencing())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var notNew *redlock.NotNewError
	if err := c.Bootstrap(ctx); err != nil && !errors.As(err, &notNew) {
		log.Fatal(err)
	}

	err = c.Do(ctx, "reports:nightly", 10*time.Second, func(ctx context.Context, l *redlock.Lease) error {
		fmt.Println("held with fencing token", l.FencingToken())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
