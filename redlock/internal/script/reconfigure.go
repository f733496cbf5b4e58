package script

import (
	"context"
	_ "embed"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
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

// RetiredTo returns the settings of the reconfiguration that retired a
// node that carries marker, and whether one did.
func RetiredTo(marker string) (string, bool) { return strings.CutPrefix(marker, retiredPrefix) }

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
	// Record is the change's record (ChangeRecord); not with StepFinish.
	Record string
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
	keys, args := a.call()
	res, err := asSlice(reconfigureScript.Run(ctx, n.conn, keys, args...))
	if err != nil {
		return ReconfigureReply{}, err
	}
	return parseReconfigure(res)
}

func (a ReconfigureArgs) call() ([]string, []any) {
	args := []any{string(a.Step), a.From, a.To}
	if a.Step != StepFinish {
		args = append(args, a.Record)
	}
	if a.Step == StepHold {
		args = append(args, micros(a.HoldOff), a.TTL.Milliseconds(), a.ID)
	}
	return []string{MarkerKey, PendingKey, TraceKey}, args
}

// ParseReconfigure reads a reconfigure script's reply, as ParseAcquire.
func ParseReconfigure(res []any) (ReconfigureReply, error) { return parseReconfigure(res) }

// ChangeRecord is what a reconfiguration writes on every node it marks
// (reconfigure.lua keeps it under TraceKey): the old settings from, the new
// settings to, and the identities of the new list's nodes (IdentKey's
// values, in any order). Two runs are one change, a rerun, only when their
// records are equal: a run with other old settings, or for another node
// list, is another change, and a node another change marked is not moved.
func ChangeRecord(from, to string, newIDs []string) string {
	ids := slices.Clone(newIDs)
	slices.Sort(ids)
	return "from " + from + "\nto " + to + "\nnodes " + strings.Join(ids, ",")
}

// Change is a change record read back: its old and new settings and how
// many new nodes it named.
type Change struct {
	From, To string
	Nodes    int
}

// ParseChange reads a change record (ChangeRecord); false for anything
// else, "" included.
func ParseChange(rec string) (Change, bool) {
	from, rest, ok1 := strings.Cut(rec, "\n")
	to, ids, ok2 := strings.Cut(rest, "\n")
	from, ok3 := strings.CutPrefix(from, "from ")
	to, ok4 := strings.CutPrefix(to, "to ")
	ids, ok5 := strings.CutPrefix(ids, "nodes ")
	if !(ok1 && ok2 && ok3 && ok4 && ok5) {
		return Change{}, false
	}
	return Change{From: from, To: to, Nodes: len(strings.Split(ids, ","))}, true
}

// ReconfigureMovable is the rule of Reconfigure's step 0 for one node
// that answered: whether the change rec, from the settings from to the
// settings to, may move a node that carries marker and the change record
// trace. It may move a node that carries the old settings, none (new, or
// lost its data), or this change's own marks or the new settings this
// change wrote (an earlier run of it stopped, or finished). The marks of
// another change, or the new settings from anywhere else, are not its to
// move: a rerun with other old settings would size its hold-off from them,
// a stale run with another node list would set up a second list under the
// same settings, and a node that carried the new settings before belongs
// to another deployment, whose clients could lock on it at once.
// reconfigure.lua applies the same rule to each step; redlock's
// reconfigure.go and the model checker (redlock/internal/model) decide
// with it.
func ReconfigureMovable(marker, trace, from, to, rec string) bool {
	_, moving := MovingTo(marker)
	switch {
	case marker == "" || marker == from:
		return true
	case marker == to || moving || strings.HasPrefix(marker, retiredPrefix):
		return from != to && trace == rec
	}
	return false
}

// ReconfigureOldSettingsOf is what one old node that answered
// Reconfigure's look says of the old settings, when the command was given
// none, for a change to the settings to: on a node a change marked
// (carrying "reconfiguring to", "retired", or to itself with that change's
// record) the change's old settings, so that a rerun reads the settings
// its first run had; otherwise its marker ("" for none: a new node, or one
// that lost its data, says nothing). A node that carries another
// change's new settings, other than to, gives them: a change from there.
// Whatever it reads, step 0 then checks every node against it with
// ReconfigureMovable, as it checks typed settings. redlock's
// reconfigure.go and the model checker decide with it.
func ReconfigureOldSettingsOf(marker, trace, to string) string {
	_, moving := MovingTo(marker)
	ch, traced := ParseChange(trace)
	switch {
	case traced && (moving || strings.HasPrefix(marker, retiredPrefix)):
		return ch.From
	case traced && marker == ch.To && ch.To == to:
		return ch.From
	}
	return marker
}

// ReconfigureFinished is the rule by which Reconfigure finds, at its
// look, that an earlier run finished the change from the settings from
// to the settings to, and writes nothing: every new node carries to
// (news, their markers) and every old node that leaves is retired to it
// (leaving, theirs). The caller has heard every node of both lists, and
// checked each node's change record with ReconfigureMovable: a node that
// carries to or a retirement does so by this change. A node only marked
// "reconfiguring to" is not done: its hold-off may never have been
// stamped. redlock's reconfigure.go and the model checker decide with it.
func ReconfigureFinished(from, to string, news, leaving []string) bool {
	if from == to {
		return false
	}
	for _, m := range news {
		if m != to {
			return false
		}
	}
	for _, m := range leaving {
		if m != Retired(to) {
			return false
		}
	}
	return true
}

// ReconfigureNeed is how many old nodes (of olds) must take step 1 before
// step 2 may start: enough that those left with the old settings are
// fewer than a majority of the old list.
func ReconfigureNeed(olds int) int { return olds - quorum.Majority(olds) + 1 }

// ReconfigureUnchanged is the rule by which Reconfigure, with the same
// old and new settings (from == to), finds nothing to change: the two
// lists are as long, every node of both answered (ids[i] is the identity
// of the node at entry i, "" for one that did not), and every old node is
// in the new list. redlock's reconfigure.go applies it; the model checker
// decides with it too.
func ReconfigureUnchanged(from, to string, olds, news []string) bool {
	if from != to || len(olds) != len(news) {
		return false
	}
	stays := map[string]bool{}
	for _, id := range news {
		if id == "" {
			return false
		}
		stays[id] = true
	}
	for _, id := range olds {
		if id == "" || !stays[id] {
			return false
		}
	}
	return true
}

// Trace reads the record of the change that marked n ("" for none): the
// record every step of a reconfiguration writes with its marker.
func (n *Node) Trace(ctx context.Context) (string, error) {
	v, err := n.conn.Do(ctx, "get", TraceKey)
	if err == nil && v == nil {
		return "", nil
	}
	return asText(v, err)
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
