package redlock

import (
	"context"
	"sync"
	"sync/atomic"
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
	identChanges metric.Int64Counter     // per node: replies from another server than the proven one
	configErrors metric.Int64Counter     // by kind
	heldTime     metric.Float64Histogram // from obtained to released or lost, seconds
	gauges       metric.Registration     // leases held, nodes in quarantine

	keyAttr bool // WithKeyAttribute: measurements carry the key
}

const meterName = "github.com/quorumlock/quorumlock/redlock"

// newInstruments creates the instruments; held and quarantined are read
// by the gauges' callback (nil: no gauges).
func newInstruments(mp metric.MeterProvider, keyAttr bool, held *atomic.Int64, quarantined func() int64) (*instruments, error) {
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(meterName)
	in := instruments{keyAttr: keyAttr}
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
		metric.WithDescription("Time from Lock or TryLock being called to its return, by outcome: under contention, the hand-off latency."),
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
	if in.identChanges, err = m.Int64Counter("quorumlock.node.identity.changes",
		metric.WithDescription("Entries of the node list found answering from another server than the one their identity proof verified (a re-pointed proxy or DNS name) or from one without an identity (it lost its data): their votes do not count until a new proof."),
		metric.WithUnit("{change}")); err != nil {
		return nil, err
	}
	if in.configErrors, err = m.Int64Counter("quorumlock.config.errors",
		metric.WithDescription("Calls refused because the client is configured wrongly, by kind: settings (they disagree with the deployment's), duplicate_node (two entries reach one server)."),
		metric.WithUnit("{error}")); err != nil {
		return nil, err
	}
	if in.heldTime, err = m.Float64Histogram("quorumlock.lease.held.duration",
		metric.WithDescription("How long leases were held, from obtained to released (outcome released) or lost or expired (outcome lost)."),
		metric.WithUnit("s")); err != nil {
		return nil, err
	}
	leases, err := m.Int64ObservableGauge("quorumlock.leases.held",
		metric.WithDescription("Leases this client holds now."),
		metric.WithUnit("{lease}"))
	if err != nil {
		return nil, err
	}
	quarantine, err := m.Int64ObservableGauge("quorumlock.nodes.quarantined",
		metric.WithDescription("Nodes this client last saw in restart quarantine (not admitted to vote)."),
		metric.WithUnit("{node}"))
	if err != nil {
		return nil, err
	}
	if held != nil {
		in.gauges, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			o.ObserveInt64(leases, held.Load())
			o.ObserveInt64(quarantine, quarantined())
			return nil
		}, leases, quarantine)
		if err != nil {
			return nil, err
		}
	}
	return &in, nil
}

// close stops the gauges' callback, so that a closed Client is not kept
// alive by its MeterProvider.
func (in *instruments) close() {
	if in.gauges != nil {
		_ = in.gauges.Unregister()
	}
}

var (
	outcomeKey = attribute.Key("outcome")
	nodeKey    = attribute.Key("node")
	keyKey     = attribute.Key("key")
	kindKey    = attribute.Key("kind")
)

// attrs is one measurement's attributes, as the options Add and Record
// take, built once per outcome (see outcomeOpts).
type attrs struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func attrsOf(kvs ...attribute.KeyValue) attrs {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return attrs{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

var noAttrs = attrsOf()

// outcomeOpts caches the measurement options per outcome: building them
// per call allocates, on every attempt, even when no provider is
// installed, and so does a variadic call that builds its slice.
// The known outcomes are in a map read without locking (a sync.Map would
// box the string key on every lookup); others are added as they come.
var (
	knownOutcomes = func() map[string]attrs {
		m := map[string]attrs{}
		for _, o := range []string{"obtained", "config", "closed", "invalid", "ok", "lost", "error", "released",
			string(ReasonHeld), string(ReasonNoQuorum), string(ReasonQuarantine), string(ReasonValidity),
			string(ReasonFenceCommit), string(ReasonCancelled), string(ReasonLocal)} {
			m[o] = attrsOf(outcomeKey.String(o))
		}
		return m
	}()
	outcomeOpts sync.Map // string -> attrs, for the others
)

func outcomeOpt(outcome string) attrs {
	if o, ok := knownOutcomes[outcome]; ok {
		return o
	}
	if o, ok := outcomeOpts.Load(outcome); ok {
		return o.(attrs)
	}
	o, _ := outcomeOpts.LoadOrStore(outcome, attrsOf(outcomeKey.String(outcome)))
	return o.(attrs)
}

// opts is the attributes of a measurement on key with outcome ("": none):
// the key only with WithKeyAttribute, since keys can be many (one per
// entity) or sensitive.
func (in *instruments) opts(outcome, key string) attrs {
	switch {
	case !in.keyAttr && outcome == "":
		return noAttrs
	case !in.keyAttr:
		return outcomeOpt(outcome)
	case outcome == "":
		return attrsOf(keyKey.String(key))
	}
	return attrsOf(outcomeKey.String(outcome), keyKey.String(key))
}

func (in *instruments) attempt(outcome, key string, took time.Duration) {
	ctx := context.Background()
	set := in.opts(outcome, key)
	in.acquisitions.Add(ctx, 1, set.add...)
	in.acquireTime.Record(ctx, took.Seconds(), set.rec...)
}

func (in *instruments) wait(outcome, key string, took time.Duration) {
	in.waitTime.Record(context.Background(), took.Seconds(), in.opts(outcome, key).rec...)
}

func (in *instruments) extend(outcome, key string) {
	in.extends.Add(context.Background(), 1, in.opts(outcome, key).add...)
}

func (in *instruments) leaseLost(key string) {
	in.lost.Add(context.Background(), 1, in.opts("", key).add...)
}

func (in *instruments) held(outcome, key string, took time.Duration) {
	in.heldTime.Record(context.Background(), took.Seconds(), in.opts(outcome, key).rec...)
}

func (in *instruments) configError(kind string) {
	in.configErrors.Add(context.Background(), 1, metric.WithAttributes(kindKey.String(kind)))
}

func (in *instruments) identityChange(name string) {
	in.identChanges.Add(context.Background(), 1, metric.WithAttributes(nodeKey.String(name)))
}

func (in *instruments) nodeError(name string) {
	in.nodeErrors.Add(context.Background(), 1, metric.WithAttributes(nodeKey.String(name)))
}
