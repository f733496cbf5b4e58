package suite

import (
	"context"

	"github.com/quorumlock/quorumlock/bench/internal/impl"
	"github.com/quorumlock/quorumlock/internal/servers"
	"github.com/quorumlock/quorumlock/redlock"
)

// uncontended: one goroutine, Lock then Release on the same key (always
// free when Lock starts), for the floor, the single-node baseline, redsync,
// quorumlock, quorumlock on rueidis and on valkey-go (the same Client
// through the driver adapters), and quorumlock WithFencing, interleaved.
func uncontended(ctx context.Context, cfg Config, _ []*servers.RedisProcess, addrs []string, key string) ([]Result, error) {
	ql, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer ql.Close()
	qf, err := impl.NewQL(impl.Clients(addrs), true, cfg.TTL, redlock.WithFencing())
	if err != nil {
		return nil, err
	}
	defer qf.Close()
	qr, err := impl.NewQLRueidis(addrs, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer qr.Close()
	qv, err := impl.NewQLValkey(addrs, cfg.TTL)
	if err != nil {
		return nil, err
	}
	defer qv.Close()
	rs := impl.NewRS(impl.Clients(addrs), cfg.TTL)
	defer rs.Close()
	single := impl.NewSingle(impl.Clients(addrs[:1])[0], cfg.TTL)
	defer single.Close()
	floor := impl.NewFloor(impl.Clients(addrs))
	defer floor.Close()

	// Each block's CPU and node commands are read too (INFO on every node
	// before and after a block of ops operations, outside the timings).
	probes, closeProbes := openProbes(addrs)
	defer closeProbes()
	ops := pick(cfg, 300, 1000)
	es := []*entry{
		{scenario: Uncontended, l: floor, key: key + ":floor", ops: ops},
		{scenario: Uncontended, l: single, key: key + ":single", ops: ops},
		{scenario: Uncontended, l: rs, key: key + ":redsync", ops: ops},
		{scenario: Uncontended, l: ql, key: key + ":quorumlock", ops: ops},
		{scenario: Uncontended, l: qr, key: key + ":rueidis", ops: ops},
		{scenario: Uncontended, l: qv, key: key + ":valkey", ops: ops},
		{scenario: UncontendedFenced, variant: "WithFencing", l: qf, key: key + ":fenced", ops: ops},
	}
	for _, e := range es {
		e.cost.probes = probes
	}
	warm(ctx, es, pick(cfg, 100, 500))
	err = interleave(ctx, es, pick(cfg, 5, 20))
	var out []Result
	for _, e := range es {
		out = append(out, e.result())
	}
	return out, err
}
