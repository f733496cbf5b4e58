package suite

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quorumlock/quorumlock/bench/internal/nodestats"
)

// cost sums where an implementation's work went over its measured blocks:
// the commands the nodes executed (those inside scripts included), the
// nodes' CPU time and this process's. Blocks run one implementation at a
// time, so the process's CPU in a block is that implementation's (plus
// the runtime's own upkeep, the same for all).
type cost struct {
	probes    []*redis.Client // nil: not measured
	nodeCmds  int64
	nodesCPU  float64 // seconds
	clientCPU time.Duration
	cpuBad    bool  // the process's CPU could not be read in some block
	err       error // the first failed INFO reading

	// the reading at the start of the block in progress
	n0   []nodestats.Stats
	nerr error
	c0   time.Duration
	ok0  bool
}

// begin takes the readings before a measured block.
func (c *cost) begin(ctx context.Context) {
	if c.probes == nil {
		return
	}
	c.n0, c.nerr = nodestats.ReadAll(ctx, c.probes)
	c.c0, c.ok0 = processCPU()
}

// end takes the readings after the block and adds the difference.
func (c *cost) end(ctx context.Context) {
	if c.probes == nil {
		return
	}
	c1, ok1 := processCPU()
	c.clientCPU += c1 - c.c0
	c.cpuBad = c.cpuBad || !c.ok0 || !ok1
	nerr := c.nerr
	if nerr == nil {
		var n1 []nodestats.Stats
		if n1, nerr = nodestats.ReadAll(context.WithoutCancel(ctx), c.probes); nerr == nil {
			for _, d := range nodestats.SubAll(n1, c.n0) {
				c.nodeCmds += d.Total()
				c.nodesCPU += d.CPU
			}
		}
	}
	if nerr != nil && c.err == nil {
		c.err = nerr
	}
}

// fill sets r's per-operation cost fields for n operations.
func (c *cost) fill(r *Result, n int) {
	if c.probes == nil || n == 0 {
		return
	}
	if c.err == nil {
		r.NodeCmdsPerOp = ptr(float64(c.nodeCmds) / float64(n))
		r.NodeCommandsPerOp = r.NodeCmdsPerOp
		r.NodesCPUusPerOp = ptr(c.nodesCPU * 1e6 / float64(n))
	} else if r.FirstError == "" {
		r.FirstError = "reading the nodes' INFO: " + c.err.Error()
	}
	if !c.cpuBad {
		r.ClientCPUusPerOp = ptr(float64(c.clientCPU.Microseconds()) / float64(n))
	}
}
