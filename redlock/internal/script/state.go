package script

import (
	"context"
	_ "embed"
	"strconv"
)

//go:embed state.lua
var stateSrc string

var stateScript = newScript("state", stateSrc)

// State is a read-only view of a node's admission state, and of one lock
// key when asked for (state.lua).
type State struct {
	Marker string // the admission marker's settings; "" without one
	// Pending is the settings of a quarantine in progress ("" for none),
	// and Quarantine its timing.
	Pending    string
	Quarantine Quarantine
	// With a key: its value ("" when absent), remaining life in ms (-1:
	// no expiry, -2: no key) and fence ("" when none).
	HasKey bool
	Value  string
	PTTL   int64
	Fence  string
	// Meta is the metadata stored with the key, if it belongs to Value
	// (see Metadata); "" for none.
	Meta string
}

// State reads n's admission state.
func (n *Node) State(ctx context.Context) (State, error) {
	r := StateRequest()
	res, err := asSlice(stateScript.Run(ctx, n.conn, r.Keys))
	if err != nil {
		return State{}, err
	}
	return parseState(res)
}

// StateArgs is the command that reads a node's admission state and key's,
// for a pipeline: see StateOf. It sends the script's source (EVAL), since a
// pipeline cannot answer a NOSCRIPT with a second try.
func StateArgs(key string) []any {
	return stateScript.EvalArgs([]string{MarkerKey, PendingKey, key, FenceKey(key), MetaKey(key)})
}

// StateOf reads the reply of a StateArgs command.
func StateOf(v any, err error) (State, error) {
	res, err := asSlice(v, err)
	if err != nil {
		return State{}, err
	}
	return parseState(res)
}

func parseState(res []any) (State, error) {
	if len(res) < 5 {
		return State{}, malformed("state script returned %d values", len(res))
	}
	s := State{Marker: text(res[0]), Pending: text(res[1])}
	// Read as inspect always has: a malformed stamp counts as 0.
	s.Quarantine.Stamp, _ = strconv.ParseInt(text(res[2]), 10, 64)
	s.Quarantine.Length, _ = strconv.ParseInt(text(res[3]), 10, 64)
	s.Quarantine.Now, _ = strconv.ParseInt(text(res[4]), 10, 64)
	if len(res) >= 8 {
		s.HasKey = true
		s.Value = text(res[5])
		s.PTTL, _ = res[6].(int64)
		s.Fence = text(res[7])
	}
	if len(res) >= 9 {
		s.Meta, _ = Metadata(text(res[8]), s.Value)
	}
	return s, nil
}
