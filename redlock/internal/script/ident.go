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
	return asText(identScript.Run(ctx, n.conn, keys, args...))
}

func identCall(fresh string) ([]string, []any) { return []string{IdentKey}, []any{fresh} }

// Proof is what one round of the ident script over every entry of a
// client's node list proves (docs/protocol.md, "One server, one vote").
type Proof struct {
	// Dup: entries First and Second (First < Second, the first such pair
	// in entry order) read one identity: they are one server.
	Dup           bool
	First, Second int
	// Missed: an entry verified before did not answer, and may be an
	// unverified one under another name: the round proves nothing new.
	Missed bool
	// Verified lists the entries the round verifies, each with the
	// identity it read: every entry that answered and was not verified
	// yet, or was verified with another identity than it read now (its
	// name was re-pointed, or its server lost its data); none when Dup or
	// Missed.
	Verified []int
}

// Prove is the rule of one proof round: ids[i] is the identity entry i
// read in the round ("" if it did not answer), proven[i] the identity
// entry i was verified with before it ("" if it was not). An entry is
// verified when it reads an identity no other entry read and every entry
// verified before answered the same round. redlock's identity.go applies
// it; the model checker (redlock/internal/model) decides with it too.
//
// After a round that verifies, the verified entries' identities are ones
// that entries read in that round, pairwise distinct: an entry verified
// before that answered with its old identity keeps it, and one that read
// another is verified with the new one. SameServer relies on that.
func Prove(ids, proven []string) Proof {
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
		if proven[i] != "" && v == "" {
			return Proof{Missed: true}
		}
	}
	var p Proof
	for i, v := range ids {
		if v != "" && v != proven[i] {
			p.Verified = append(p.Verified, i)
		}
	}
	return p
}

// SameServer is the rule every counted reply passes (docs/protocol.md,
// "One server, one vote"): a grant, a renewal, a fence commit or a
// hand-off from an entry of a client's node list counts only if the
// server that ran it read the identity the entry was proven with. proven
// is that identity ("" for an entry not verified: nothing of it counts),
// read the identity the script read on its server ("" for a server with
// none: new, or it lost its data, and must be proven again). A name that
// was re-pointed to another server after its proof (a proxy, a DNS
// name), or a pool that still holds connections to the old one, is then
// told apart reply by reply. Within one round a client compares every
// reply with one reading of its entries' proven identities: those are
// pairwise distinct (see Prove), and a server reads one identity at a
// time, so no server counts for two entries. redlock's acquire, commit,
// extend and hand-off counts apply it; the model checker too.
func SameServer(proven, read string) bool { return proven != "" && read == proven }
