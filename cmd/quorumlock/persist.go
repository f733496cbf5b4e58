package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/internal/nodesettings"
)

// run's look at the persistence settings, which New does not read (it
// reads eviction and replicas in its probe; check reads everything): RDB
// snapshots and an AOF not synced on every write each let a restarted node
// come back admitted without the locks it granted last, and a cron job
// should say so where its output goes. The read goes over the node
// clients directly, not through the redlock.Client, so that a slow node
// here changes nothing in how the lock calls wait for it.

// persistReadTimeout bounds each node's read. A node that does not answer
// in time is one New has warned of already.
const persistReadTimeout = time.Second

// persistSettle is how long run waits, once it holds the lock (or knows
// it will not get it), for the reads still out: the reads start before
// the lock attempt and take one round trip, so on a healthy deployment
// they are in by then. Once a majority of them has ended, it waits
// persistGrace more at most, as New's probe does: a node that is down
// keeps its read going while go-redis retries the dial, and must not
// delay every run by the whole bound. A read that lands later is still
// printed while the command runs.
const (
	persistSettle = 100 * time.Millisecond
	persistGrace  = 20 * time.Millisecond
)

// persistWatch is the reads of one run.
type persistWatch struct {
	done     chan struct{} // closed when every node's read ended
	majority chan struct{} // closed when a majority of them ended
	mu       sync.Mutex
	stop     bool // run is ending: print nothing more
}

// watchPersistence reads save, appendfsync and appendonly on every node in
// the background and warns through logger of each unsafe one: one line
// per node and setting. A node that refuses CONFIG GET (a managed
// service, an ACL user without +config) is passed over: check says so.
func watchPersistence(cs []*redis.Client, logger *slog.Logger) *persistWatch {
	w := &persistWatch{done: make(chan struct{}), majority: make(chan struct{})}
	var wg sync.WaitGroup
	var ended atomic.Int32
	for i, c := range cs {
		wg.Go(func() {
			for _, f := range readPersistence(c) {
				w.mu.Lock()
				if !w.stop {
					logger.Warn(f, "node", i, "addr", nodeAddr(c))
				}
				w.mu.Unlock()
			}
			if int(ended.Add(1)) == len(cs)/2+1 {
				close(w.majority)
			}
		})
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// settle waits until every read ended, persistGrace after a majority
// of them did, or persistSettle at most.
func (w *persistWatch) settle() {
	t := time.NewTimer(persistSettle)
	defer t.Stop()
	select {
	case <-w.done:
		return
	case <-w.majority:
	case <-t.C:
		return
	}
	g := time.NewTimer(persistGrace)
	defer g.Stop()
	select {
	case <-w.done:
	case <-g.C:
	case <-t.C:
	}
}

// end stops the warnings: what lands after run decided its outcome is
// not printed.
func (w *persistWatch) end() {
	w.mu.Lock()
	w.stop = true
	w.mu.Unlock()
}

// readPersistence returns what is unsafe in c's persistence settings, as
// warning messages; nothing when the node could not be read.
func readPersistence(c *redis.Client) []string {
	ctx, cancel := context.WithTimeout(context.Background(), persistReadTimeout)
	defer cancel()
	pipe := c.Pipeline()
	save := pipe.ConfigGet(ctx, "save")
	fsync := pipe.ConfigGet(ctx, "appendfsync")
	info := pipe.Info(ctx, "persistence")
	_, _ = pipe.Exec(ctx)
	sv, serr := save.Result()
	fv, ferr := fsync.Result()
	is, ierr := info.Result()
	if serr != nil || ferr != nil || ierr != nil {
		return nil
	}
	var out []string
	for _, r := range nodesettings.Persistence(strings.TrimSpace(sv["save"]), infoValue(is, "aof_enabled") == "1", fv["appendfsync"]) {
		out = append(out, "node "+r.What+"; "+r.Fix)
	}
	return out
}

// nodeAddr names a node as New's warnings do: host:port, or unix:// and
// the socket's path.
func nodeAddr(c *redis.Client) string {
	o := c.Options()
	if o.Network == "unix" {
		return "unix://" + o.Addr
	}
	return o.Addr
}

// infoValue is the value of one "field:value" line of an INFO reply.
func infoValue(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
