package suite

import (
	"runtime/metrics"
	"slices"
	"time"
)

// pct returns the q-quantile (0..1) of ds by nearest rank; ds is sorted in
// place. It returns 0 for no samples.
func pct(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(q*float64(len(ds))+0.999999) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func sum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

var allocSamples = []metrics.Sample{
	{Name: "/gc/heap/allocs:objects"},
	{Name: "/gc/heap/tiny/allocs:objects"},
}

// allocs returns the process's cumulative count of heap allocations, tiny
// ones included (what testing's allocs/op counts). It covers every
// goroutine, so it charges an implementation for its background work too.
func allocs() uint64 {
	s := slices.Clone(allocSamples)
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return n
}

// sampler accumulates one implementation's latencies and allocations over
// the blocks it ran in.
type sampler struct {
	lat    []time.Duration
	errs   int
	allocs uint64
	calls  int64
	ops    int
	first  error
}

func (s *sampler) fail(err error) {
	s.errs++
	if s.first == nil {
		s.first = err
	}
}

func (s *sampler) result(scenario, impl string) Result {
	r := Result{Scenario: scenario, Impl: impl, Samples: len(s.lat), Errors: s.errs}
	if s.first != nil {
		r.FirstError = s.first.Error()
	}
	if len(s.lat) == 0 {
		return r
	}
	total := sum(s.lat)
	r.P50us = us(pct(s.lat, 0.50))
	r.P99us = us(pct(s.lat, 0.99))
	r.MaxUs = us(s.lat[len(s.lat)-1])
	if total > 0 {
		r.OpsPerSec = float64(len(s.lat)) / total.Seconds()
	}
	if s.ops > 0 {
		a := float64(s.allocs) / float64(s.ops)
		r.AllocsPerOp = &a
		if s.calls > 0 {
			r.CallsPerOp = ptr(float64(s.calls) / float64(s.ops))
		}
	}
	return r
}
