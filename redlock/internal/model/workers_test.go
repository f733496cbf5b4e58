package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Expanding a level on several goroutines merges the successors in the
// same order as one goroutine does: the same states, steps and depth, and
// for a known defect the same counterexample, step for step.
func TestExplore_WorkersChangeNothingButTheTime(t *testing.T) {
	t.Parallel()
	defect, ok := KnownDefectNamed("reconfig-read-marks")
	require.True(t, ok)
	for _, cfg := range []Config{scenario(t, "reconfig-disjoint"), defect.Config} {
		one, err := Explore(cfg)
		require.NoError(t, err)
		cfg.Workers = 3
		three, err := Explore(cfg)
		require.NoError(t, err)
		require.Equal(t, one.States, three.States)
		require.Equal(t, one.Steps, three.Steps)
		require.Equal(t, one.Depth, three.Depth)
		require.Equal(t, one.Violation, three.Violation)
		require.Equal(t, one.Trace, three.Trace)
		require.Equal(t, one.Scripts, three.Scripts)
	}
}
