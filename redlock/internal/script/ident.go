package script

import (
	"context"
	_ "embed"
)

//go:embed ident.lua
var identSrc string

var identScript = newScript("ident", identSrc)

// Ident reads the identity of the server n reaches (ident.lua), writing
// fresh as that identity if the server has none yet.
func (n *Node) Ident(ctx context.Context, fresh string) (string, error) {
	keys, args := identCall(fresh)
	return identScript.Run(ctx, n.uc, keys, args...).Text()
}

func identCall(fresh string) ([]string, []any) { return []string{IdentKey}, []any{fresh} }

// Proof is what one round of the ident script over every entry of a
// client's node list proves (docs/fencing.md, "One server, one vote").
type Proof struct {
	// Dup: entries First and Second (First < Second, the first such pair
	// in entry order) read one identity: they are one server.
	Dup           bool
	First, Second int
	// Missed: an entry verified before did not answer, and may be an
	// unverified one under another name: the round proves nothing new.
	Missed bool
	// Verified lists the entries the round verifies: every entry that
	// answered and was not verified yet (none when Dup or Missed).
	Verified []int
}

// Prove is the rule of one proof round: ids[i] is the identity entry i
// read in the round ("" if it did not answer), verified[i] whether entry
// i was verified before it. An entry is verified when it reads an
// identity no other entry read and every entry verified before answered
// the same round. redlock's identity.go applies it; the model checker
// (redlock/internal/model) decides with it too.
func Prove(ids []string, verified []bool) Proof {
	byID := map[string]int{}
	for i, v := range ids {
		if v == "" {
			continue
		}
		if j, ok := byID[v]; ok {
			return Proof{Dup: true, First: j, Second: i}
		}
		byID[v] = i
	}
	for i, v := range ids {
		if verified[i] && v == "" {
			return Proof{Missed: true}
		}
	}
	var p Proof
	for i, v := range ids {
		if v != "" && !verified[i] {
			p.Verified = append(p.Verified, i)
		}
	}
	return p
}
