package chaos

// WorkerEnv is the environment variable that carries a worker's
// configuration (JSON) from the coordinator to the worker process.
const WorkerEnv = "QUORUMLOCK_CHAOS_WORKER"

// workerConfig is everything a worker process needs. Durations are in
// milliseconds so the JSON stays readable.
type workerConfig struct {
	ID        int         `json:"id"`
	Lock      string      `json:"lock"`  // the kind of lock: redlock (also ""), pg-advisory, etcd
	Nodes     []string    `json:"nodes"` // the nodes' own addresses: their identity for redlock, the etcd endpoints
	Dial      []string    `json:"dial"`  // what to dial for each node: this worker's proxies
	DSN       string      `json:"dsn"`
	Key       string      `json:"key"`
	Fencing   string      `json:"fencing"`
	TTLms     int         `json:"ttl_ms"`
	WorkMs    int         `json:"work_ms"`
	NodeMs    int         `json:"node_timeout_ms"`
	LockMs    int         `json:"lock_wait_ms"`
	Sections  int         `json:"sections"`
	MaxFail   int         `json:"max_failures"` // consecutive failed Lock calls that end the worker (0: never)
	NoQuar    bool        `json:"no_quarantine"`
	StallRate float64     `json:"stall_rate"`
	StallMin  int         `json:"stall_min_ms"`
	StallMax  int         `json:"stall_max_ms"`
	HoldMs    int         `json:"hold_cap_ms"` // > 0: sections run under Do, extended up to this long
	PollMs    int         `json:"poll_ms"`     // > 0: poll TryLock this often instead of waiting in Lock
	Seed      uint64      `json:"seed"`
	Gates     []gatePoint `json:"gates"`      // wait for the coordinator there
	GateUntil int         `json:"gate_until"` // gates apply to attempts numbered below this
	BudgetMs  int         `json:"budget_ms"`  // stop after this long (0: no limit)
	UntilNs   int64       `json:"until_ns"`   // > 0: start no attempt after this time (stampNs)

	// How the worker's lock client differs from its peers', as clients
	// of one deployment do in real fleets (the nemesis fault sets them).
	Network  string  `json:"network,omitempty"`      // go-redis Network of the node clients ("": tcp)
	MaxTTLms int     `json:"max_ttl_ms,omitempty"`   // WithMaxTTL (0: TTLms, the deployment's)
	Drift    float64 `json:"drift_factor,omitempty"` // WithDriftFactor (0: the default, the deployment's)
	Style    string  `json:"style,omitempty"`        // sections under Lock ("") or Do: "do-extend", "do-panic"; leaderships: "election"; or "transfers"
	Row      int     `json:"row,omitempty"`          // the counter row the sections increment (0: row 1)
	PauseMs  int     `json:"pause_ms,omitempty"`     // wait this long after a refused configuration
	// Bootstrap: call Client.Bootstrap before every lock call, as a
	// service that bootstraps at every start would (it must admit nothing
	// once the deployment is in use).
	Bootstrap bool `json:"bootstrap,omitempty"`
	// AliasDownMs > 0: the worker's last node is node 0 again under
	// another name, which refuses connections for this long after the
	// worker starts (so New's probe cannot see that it is node 0).
	AliasDownMs int `json:"alias_down_ms,omitempty"`
}

// Styles of taking the lock (workerConfig.Style).
const (
	// styleDoExtend: sections run under Do, and call Extend themselves
	// between read and write, while Do's renewal runs beside them.
	styleDoExtend = "do-extend"
	// styleDoPanic: sections run under Do, and fn panics now and then
	// after its write; the worker recovers and goes on.
	styleDoPanic = "do-panic"
	// styleElection: each section is a leadership of the election named
	// after the key (redlock/election): Campaign, the section, resign.
	styleElection = "election"
	// styleTransfers: each section is a transfer between two accounts,
	// both locked at once (worker_transfer.go).
	styleTransfers = "transfers"
)

// row is the counter row the worker's sections increment.
func (c workerConfig) row() int { return max(c.Row, 1) }

// workerStats is the worker's last line on stdout.
type workerStats struct {
	Accepted  int    `json:"accepted"`
	Rejected  int    `json:"rejected"`
	Failures  int    `json:"lock_failures"`
	Polls     int    `json:"polls,omitempty"` // TryLock refusals a polling worker slept after
	Errors    int    `json:"errors"`
	LastError string `json:"last_error,omitempty"`
	// SectionError is the last error that ended a section after the
	// grant (neither written nor refused by fencing).
	SectionError string `json:"section_error,omitempty"`

	Refused      int    `json:"refused,omitempty"`          // lock calls refused with a *redlock.ConfigError
	RefusedError string `json:"refused_error,omitempty"`    // the first such error
	Panics       int    `json:"panics,omitempty"`           // fn panics recovered (do-panic)
	AfterPanic   int    `json:"after_panic,omitempty"`      // sections granted after the first panic
	Extends      int    `json:"extends,omitempty"`          // Extend calls from inside fn (do-extend)
	ExtendErrors int    `json:"extend_errors,omitempty"`    // of those, failed ones
	Bootstraps   int    `json:"bootstraps,omitempty"`       // Bootstrap calls (workerConfig.Bootstrap)
	BootstrapErr int    `json:"bootstrap_errors,omitempty"` // of those, refused ones (the deployment in use)
}
