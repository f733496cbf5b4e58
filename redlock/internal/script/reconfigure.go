package script

import (
	"context"
	_ "embed"
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed reconfigure.lua
var reconfigureSrc string

var reconfigureScript = newScript("reconfigure", reconfigureSrc)

// The markers a reconfiguration writes (reconfigure.lua builds the same
// strings). No client's settings equal either, so the acquire script
// refuses every client on them with Mismatch and returns the marker.
const (
	movingPrefix  = "reconfiguring to "
	retiredPrefix = "retired, reconfigured to "
)

// Moving is the marker of a node that a reconfiguration moves to the
// settings to: clients of to wait for its hold-off, every other client
// is refused.
func Moving(to string) string { return movingPrefix + to }

// MovingTo returns the settings a node that carries marker is being
// reconfigured to, and whether it is.
func MovingTo(marker string) (string, bool) { return strings.CutPrefix(marker, movingPrefix) }

// Retired is the marker of a node that a reconfiguration to the settings
// to took out of the deployment: every client is refused.
func Retired(to string) string { return retiredPrefix + to }

// ReconfigureStep is one step of reconfigure.lua on one node.
type ReconfigureStep string

const (
	StepRefuse ReconfigureStep = "refuse" // an old node that stays: refuse the old settings
	StepRetire ReconfigureStep = "retire" // an old node that leaves: refuse everyone
	StepHold   ReconfigureStep = "hold"   // a new node: stamp the hold-off
	StepFinish ReconfigureStep = "finish" // admit with the new settings once the hold-off is over
)

// ReconfigureArgs is one call of reconfigure.lua.
type ReconfigureArgs struct {
	Step     ReconfigureStep
	From, To string // the old and the new settings
	// With StepHold: the hold-off (rounded up to µs), how long its mark
	// lives (whole ms) and a fresh id for it.
	HoldOff time.Duration
	TTL     time.Duration
	ID      string
}

// ReconfigureStatus is reconfigure.lua's verdict.
type ReconfigureStatus int64

const (
	ReconfigureDone    ReconfigureStatus = 1  // refused, retired, held, or admitted with the new settings
	ReconfigureWaiting ReconfigureStatus = 0  // finish: the hold-off is not over (or not stamped)
	ReconfigureAlready ReconfigureStatus = 2  // admitted with the new settings already
	ReconfigureOther   ReconfigureStatus = -2 // carries other settings (Marker): not touched
)

// ReconfigureReply is one node's answer.
type ReconfigureReply struct {
	Status ReconfigureStatus
	// Left is the hold-off left on the node's clock (StepHold, and
	// StepFinish while waiting); -1µs: no hold-off stamped.
	Left   time.Duration
	Marker string // with ReconfigureOther: the node's marker ("" for none)
}

// Reconfigure runs one step of a reconfiguration on n.
func (n *Node) Reconfigure(ctx context.Context, a ReconfigureArgs) (ReconfigureReply, error) {
	args := []any{string(a.Step), a.From, a.To}
	if a.Step == StepHold {
		args = append(args, micros(a.HoldOff), a.TTL.Milliseconds(), a.ID)
	}
	res, err := reconfigureScript.Run(ctx, n.uc, []string{MarkerKey, PendingKey, TraceKey}, args...).Slice()
	if err != nil {
		return ReconfigureReply{}, err
	}
	return parseReconfigure(res)
}

// Trace reads the settings a reconfiguration moved n from ("" for none):
// the trace its finish step leaves with the new marker.
func (n *Node) Trace(ctx context.Context) (string, error) {
	v, err := n.uc.Get(ctx, TraceKey).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

func parseReconfigure(res []any) (ReconfigureReply, error) {
	var r ReconfigureReply
	if len(res) < 1 {
		return r, malformed("reconfigure script returned %d values", len(res))
	}
	st, ok := res[0].(int64)
	if !ok {
		return r, malformed("reconfigure script returned %T", res[0])
	}
	r.Status = ReconfigureStatus(st)
	if len(res) < 2 {
		return r, nil
	}
	switch v := res[1].(type) {
	case int64:
		r.Left = time.Duration(v) * time.Microsecond
	case string:
		r.Marker = v
	}
	return r, nil
}
