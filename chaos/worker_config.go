package chaos

// WorkerEnv is the environment variable that carries a worker's
// configuration (JSON) from the coordinator to the worker process.
const WorkerEnv = "QUORUMLOCK_CHAOS_WORKER"

// WorkerConfig is everything a worker process needs. Durations are in
// milliseconds so the JSON stays readable.
type WorkerConfig struct {
	ID        int      `json:"id"`
	Lock      string   `json:"lock"`  // the kind of lock: redlock (also ""), pg-advisory, etcd
	Nodes     []string `json:"nodes"` // the nodes' own addresses: their identity for redlock, the etcd endpoints
	Dial      []string `json:"dial"`  // what to dial for each node: this worker's proxies
	DSN       string   `json:"dsn"`
	Key       string   `json:"key"`
	Fencing   string   `json:"fencing"`
	TTLms     int      `json:"ttl_ms"`
	WorkMs    int      `json:"work_ms"`
	NodeMs    int      `json:"node_timeout_ms"`
	LockMs    int      `json:"lock_wait_ms"`
	Sections  int      `json:"sections"`
	MaxFail   int      `json:"max_failures"` // consecutive failed Lock calls that end the worker (0: never)
	NoQuar    bool     `json:"no_quarantine"`
	StallRate float64  `json:"stall_rate"`
	StallMin  int      `json:"stall_min_ms"`
	StallMax  int      `json:"stall_max_ms"`
	HoldMs    int      `json:"hold_cap_ms"` // > 0: sections run under Do, extended up to this long
	PollMs    int      `json:"poll_ms"`     // > 0: poll TryLock this often instead of waiting in Lock
	Seed      uint64   `json:"seed"`
	Gates     []Gate   `json:"gates"`      // wait for the coordinator there
	GateUntil int      `json:"gate_until"` // gates apply to attempts numbered below this
	BudgetMs  int      `json:"budget_ms"`  // stop after this long (0: no limit)
}

// WorkerStats is the worker's last line on stdout.
type WorkerStats struct {
	Accepted  int    `json:"accepted"`
	Rejected  int    `json:"rejected"`
	Failures  int    `json:"lock_failures"`
	Polls     int    `json:"polls,omitempty"` // TryLock refusals a polling worker slept after
	Errors    int    `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}
