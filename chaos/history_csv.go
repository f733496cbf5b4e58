package chaos

import (
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/quorumlock/quorumlock/chaos/check"
)

// writeHistory writes a run's sections to dir as CSV, named after the
// scenario and its seed so that a rerun with the same seed overwrites it.
func writeHistory(dir string, sc Scenario, seed uint64, ss []check.Section) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	name := strings.NewReplacer("/", "_", "#", "_", "%", "pct", "+", "-").Replace(sc.Name())
	path := filepath.Join(dir, fmt.Sprintf("%s_%d.csv", name, seed))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"worker", "token", "call_ns", "got_ns", "deadline_ns", "end_ns", "release_ns", "read_ns", "read", "outcome", "row", "row2", "token2"})
	for _, s := range ss {
		_ = w.Write([]string{
			strconv.Itoa(s.Worker), strconv.FormatUint(s.Token, 10),
			strconv.FormatInt(s.Call, 10), strconv.FormatInt(s.Got, 10), strconv.FormatInt(s.Deadline, 10),
			strconv.FormatInt(s.End, 10), strconv.FormatInt(s.Release, 10), strconv.FormatInt(s.ReadAt, 10), strconv.FormatInt(s.Read, 10),
			s.Outcome.String(), strconv.Itoa(s.Row), strconv.Itoa(s.Row2), strconv.FormatUint(s.Token2, 10),
		})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("chaos: history: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("chaos: history: %w", err)
	}
	return nil
}
