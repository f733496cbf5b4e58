package suite

// Result is one row of the report and of the JSON's results array
// (docs/performance.md): latencies in microseconds. Fields that do not apply to a row
// are omitted from the JSON.
type Result struct {
	Scenario    string   `json:"scenario"`
	Impl        string   `json:"impl"`
	P50us       float64  `json:"p50_us"`
	P99us       float64  `json:"p99_us"`
	OpsPerSec   float64  `json:"ops_per_sec"`
	AllocsPerOp *float64 `json:"allocs_per_op,omitempty"`
	WaiterP99us *float64 `json:"waiter_p99_us,omitempty"`
	WaiterShare *float64 `json:"waiter_share,omitempty"`

	// Beyond the fields every row has.
	Variant      string   `json:"variant,omitempty"` // e.g. "TryLock", "Lock, ctx 2s"
	Samples      int      `json:"samples"`
	Errors       int      `json:"errors"`
	FirstError   string   `json:"first_error,omitempty"`
	MaxUs        float64  `json:"max_us"`
	HandoffP50us *float64 `json:"handoff_p50_us,omitempty"`
	HandoffP95us *float64 `json:"handoff_p95_us,omitempty"`
	// Contended: a waiter's Lock call is one that got the lock from
	// another goroutine (not back from itself), or was still waiting when
	// the block ended (counted with the time it had waited).
	WaiterP50us   *float64 `json:"waiter_p50_us,omitempty"`
	WaiterMaxUs   *float64 `json:"waiter_max_us,omitempty"`
	Waiters       *int     `json:"waiters,omitempty"`
	WaitersCutOff *int     `json:"waiters_cut_off,omitempty"`
	LockP50us     *float64 `json:"lock_p50_us,omitempty"` // every successful Lock call
	LockP99us     *float64 `json:"lock_p99_us,omitempty"`
	Overlaps      *int     `json:"overlaps,omitempty"`           // mutual-exclusion violations seen
	CallsPerOp    *float64 `json:"calls_per_op,omitempty"`       // Redis commands per operation (--count-calls; always in many-keys)
	TripsPerOp    *float64 `json:"round_trips_per_op,omitempty"` // many-keys: round trips (lone commands or pipelines) per operation
	// many-keys: where the work went, per operation: commands the nodes
	// executed (those a script runs included), the five nodes' CPU time
	// and this process's CPU time, in microseconds.
	NodeCmdsPerOp *float64 `json:"node_cmds_per_op,omitempty"`
	// NodeCommandsPerOp is NodeCmdsPerOp under the name the JSON's readers
	// know it by (both are written).
	NodeCommandsPerOp *float64 `json:"node_commands_per_op,omitempty"`
	NodesCPUusPerOp   *float64 `json:"nodes_cpu_us_per_op,omitempty"`
	ClientCPUusPerOp  *float64 `json:"client_cpu_us_per_op,omitempty"`

	// renew-many and renew-few: p50_us and p99_us are the round trips to
	// the nodes during the window, and ops_per_sec the commands sent per
	// second then (all nodes); the rest is here.
	Renew *RenewStats `json:"renew,omitempty"`
	// renew-many and renew-few, from Renew, at the top of the row: the
	// leases held at once, those lost, the commands the nodes executed per
	// lease per renewal period, and what a held lease costs the client in
	// bytes (all of it, and beyond the goroutine that runs fn) and in
	// goroutines beyond the one that runs fn.
	Leases                 *int     `json:"leases,omitempty"`
	LeasesLost             *int     `json:"leases_lost,omitempty"`
	NodeCmdsPerLeasePeriod *float64 `json:"node_commands_per_lease_period,omitempty"`
	ClientBytesPerLease    *float64 `json:"client_bytes_per_lease,omitempty"`
	ClientBytesBeyondFn    *float64 `json:"client_bytes_per_lease_beyond_fn,omitempty"`
	GoroutinesPerLease     *float64 `json:"goroutines_per_lease,omitempty"`
}

func ptr[T any](v T) *T { return &v }
