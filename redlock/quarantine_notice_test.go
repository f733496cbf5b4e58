package redlock

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// stepClock is a Clock that moves only when the test moves it.
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *stepClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// TestQuarantine_TheEndOfAReportedEpisodeIsNotANewOne: an attempt that
// finds the quarantine over but the nodes not yet admitted (Wait 0), just
// after the reported end, belongs to the reported episode. Under make
// stress, TestQuarantine_ANewDeploymentSaysSoOnce got a second notice,
// with 0s left, from such an attempt.
func TestQuarantine_TheEndOfAReportedEpisodeIsNotANewOne(t *testing.T) {
	clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
	var got []QuarantineNotice
	cl := newCluster(t, 1)
	c := cl.client(t, WithClock(clk), WithMaxTTL(300*time.Millisecond), WithQuarantineNotice(func(n QuarantineNotice) { got = append(got, n) }))
	refused := func(wait time.Duration) *NotObtainedError {
		return &NotObtainedError{Key: "k", Reason: ReasonQuarantine, Nodes: 1, Wait: wait}
	}
	q := c.dep.quarantine()

	c.noticeQuarantine(refused(q))
	clk.add(q / 2)
	c.noticeQuarantine(refused(q / 2))
	require.Len(t, got, 1, "one notice while the quarantine runs")

	clk.add(q/2 + time.Millisecond) // the reported end has passed
	c.noticeQuarantine(refused(0))
	require.Len(t, got, 1, "the quarantine is over but not yet admitted: the same episode")

	c.noticeQuarantine(refused(q)) // the nodes lost their data again
	require.Len(t, got, 2, "a quarantine with time left after the reported end is a new episode")

	clk.add(3 * q)
	c.noticeQuarantine(refused(0))
	require.Len(t, got, 3, "long after the last episode, a refusal is a new one")
}
