// Package nodestats reads what a Redis node reports about its own work:
// commands executed, per command name (INFO commandstats, which also counts
// the commands a Lua script runs), CPU time (INFO cpu) and memory in use
// (INFO memory). The benchmark
// takes them before and after a window and compares the difference.
package nodestats

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// probe is the command Read itself sends; Total leaves it out so that
// reading the figures does not change them.
const probe = "info"

// Stats is one node's cumulative figures.
type Stats struct {
	Calls map[string]int64 // per command name as Redis spells it: "evalsha", "get", "client|setinfo"
	CPU   float64          // seconds of CPU the server used, user + system
	// Memory is what the server allocated (INFO memory, used_memory), in
	// bytes; a difference of two readings is what was added between them.
	Memory int64
}

// Parse reads the text of INFO commandstats and INFO cpu. It fails when a
// line it needs cannot be read, rather than report zeros.
func Parse(info string) (Stats, error) {
	s := Stats{Calls: map[string]int64{}}
	var user, sys bool
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, val, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			n, err := calls(val)
			if err != nil {
				return Stats{}, fmt.Errorf("nodestats: %q: %w", line, err)
			}
			s.Calls[strings.TrimPrefix(name, "cmdstat_")] = n
		case name == "used_memory":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil {
				return Stats{}, fmt.Errorf("nodestats: %q: %w", line, err)
			}
			s.Memory = n
		case name == "used_cpu_user" || name == "used_cpu_sys":
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return Stats{}, fmt.Errorf("nodestats: %q: %w", line, err)
			}
			s.CPU += f
			user = user || name == "used_cpu_user"
			sys = sys || name == "used_cpu_sys"
		}
	}
	if !user || !sys {
		return Stats{}, fmt.Errorf("nodestats: no used_cpu_user and used_cpu_sys in the INFO reply")
	}
	return s, nil
}

// calls reads the calls= field of a commandstats value
// ("calls=10,usec=77,usec_per_call=7.70,...").
func calls(v string) (int64, error) {
	for f := range strings.SplitSeq(v, ",") {
		if n, ok := strings.CutPrefix(f, "calls="); ok {
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, fmt.Errorf("no calls= field")
}

// Sub returns s - a: what happened between the two readings.
func (s Stats) Sub(a Stats) Stats {
	d := Stats{Calls: map[string]int64{}, CPU: s.CPU - a.CPU, Memory: s.Memory - a.Memory}
	for k, v := range s.Calls {
		if n := v - a.Calls[k]; n != 0 {
			d.Calls[k] = n
		}
	}
	return d
}

// Commands returns the calls per command name less the INFO commands that
// took the readings.
func (s Stats) Commands() map[string]int64 {
	out := make(map[string]int64, len(s.Calls))
	for k, v := range s.Calls {
		if k != probe {
			out[k] = v
		}
	}
	return out
}

// Total is the number of commands executed, inside scripts included, less
// the INFO commands that took the readings.
func (s Stats) Total() int64 {
	var n int64
	for _, v := range s.Commands() {
		n += v
	}
	return n
}

// Read takes one reading of the node behind c.
func Read(ctx context.Context, c *redis.Client) (Stats, error) {
	txt, err := c.Info(ctx, "commandstats", "cpu", "memory").Result()
	if err != nil {
		return Stats{}, err
	}
	return Parse(txt)
}

// ReadAll reads every node, in order.
func ReadAll(ctx context.Context, cs []*redis.Client) ([]Stats, error) {
	out := make([]Stats, len(cs))
	for i, c := range cs {
		s, err := Read(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("node %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// SubAll returns b[i] - a[i] for every node.
func SubAll(b, a []Stats) []Stats {
	out := make([]Stats, len(b))
	for i := range b {
		out[i] = b[i].Sub(a[i])
	}
	return out
}
