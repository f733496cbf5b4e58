package report

import (
	"encoding/json"
	"os"

	"github.com/quorumlock/quorumlock/bench/internal/suite"
)

// Meta describes the run: enough to judge how comparable two runs are.
type Meta struct {
	Mode         string    `json:"mode"` // quick or full
	Started      string    `json:"started"`
	Seconds      float64   `json:"seconds"`
	GoVersion    string    `json:"go_version"`
	GOMAXPROCS   int       `json:"gomaxprocs"`
	CPUs         int       `json:"cpus"`
	RedisVersion string    `json:"redis_version"`
	TTLms        int64     `json:"ttl_ms"`
	NodeTimeout  float64   `json:"node_timeout_ms"`
	LoadBefore   []float64 `json:"load_before,omitempty"` // 1, 5, 15 min load averages
	LoadAfter    []float64 `json:"load_after,omitempty"`
}

// Doc is the JSON document `quorumlock-bench --json` writes (docs/performance.md:
// an object with meta, a results array and targets).
type Doc struct {
	Meta    Meta           `json:"meta"`
	Results []suite.Result `json:"results"`
	Targets []Target       `json:"targets"`
}

// WriteJSON writes d to path, indented.
func WriteJSON(path string, d Doc) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
