package redlock

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// instruments are the client's OpenTelemetry metrics. They record nothing
// unless the application installs a MeterProvider (globally, or through
// WithMeterProvider): the API's default provider is a no-op.
type instruments struct {
	acquisitions metric.Int64Counter     // attempts by outcome
	acquireTime  metric.Float64Histogram // one attempt, seconds
	waitTime     metric.Float64Histogram // Lock from call to lease, seconds
	extends      metric.Int64Counter     // by outcome
	lost         metric.Int64Counter     // leases found lost or expired while held
	nodeErrors   metric.Int64Counter     // per node
}

const meterName = "github.com/quorumlock/quorumlock/redlock"

func newInstruments(mp metric.MeterProvider) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	var in instruments
	var err error
	if in.acquisitions, err = m.Int64Counter("quorumlock.acquisitions",
		metric.WithDescription("Acquisition attempts by outcome: obtained, held, no_quorum, validity, cancelled, fence_commit."),
		metric.WithUnit("{attempt}")); err != nil {
		return nil, err
	}
	if in.acquireTime, err = m.Float64Histogram("quorumlock.acquire.duration",
		metric.WithDescription("Duration of one acquisition attempt, including the fencing commit round."),
		metric.WithUnit("s")); err != nil {
		return nil, err
	}
	if in.waitTime, err = m.Float64Histogram("quorumlock.lock.wait.duration",
		metric.WithDescription("Time from Lock being called to the lease being obtained: the hand-off latency under contention."),
		metric.WithUnit("s")); err != nil {
		return nil, err
	}
	if in.extends, err = m.Int64Counter("quorumlock.extends",
		metric.WithDescription("Extend calls by outcome: ok, lost, error."),
		metric.WithUnit("{call}")); err != nil {
		return nil, err
	}
	if in.lost, err = m.Int64Counter("quorumlock.leases.lost",
		metric.WithDescription("Leases that ended by expiry or takeover instead of Release."),
		metric.WithUnit("{lease}")); err != nil {
		return nil, err
	}
	if in.nodeErrors, err = m.Int64Counter("quorumlock.node.errors",
		metric.WithDescription("Per-node failures (transport errors and timeouts) in any round."),
		metric.WithUnit("{error}")); err != nil {
		return nil, err
	}
	return &in, nil
}

var (
	outcomeKey = attribute.Key("outcome")
	nodeKey    = attribute.Key("node")
)

// outcomeOpts caches one measurement option per outcome: building it per
// call allocates, on every attempt, even when no provider is installed.
var outcomeOpts sync.Map // string -> metric.MeasurementOption

func outcomeOpt(outcome string) metric.MeasurementOption {
	if o, ok := outcomeOpts.Load(outcome); ok {
		return o.(metric.MeasurementOption)
	}
	o, _ := outcomeOpts.LoadOrStore(outcome, metric.WithAttributeSet(attribute.NewSet(outcomeKey.String(outcome))))
	return o.(metric.MeasurementOption)
}

func (in *instruments) attempt(outcome string, took time.Duration) {
	ctx := context.Background()
	set := outcomeOpt(outcome)
	in.acquisitions.Add(ctx, 1, set)
	in.acquireTime.Record(ctx, took.Seconds(), set)
}

func (in *instruments) extend(outcome string) {
	in.extends.Add(context.Background(), 1, outcomeOpt(outcome))
}

func (in *instruments) nodeError(name string) {
	in.nodeErrors.Add(context.Background(), 1, metric.WithAttributes(nodeKey.String(name)))
}
