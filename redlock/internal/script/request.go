package script

import (
	"fmt"
	"sort"
)

// Request is one script call as a node sees it: the script's name, its
// keys, and its arguments as the strings Redis hands to Lua. It is for
// tools that run the scripts outside Redis (the protocol's model checker,
// redlock/internal/model), so that they send exactly what a Client sends,
// built by the same code.
type Request struct {
	Script string
	Keys   []string
	Args   []string
}

// Request returns the call a prepared Acquire, Release, Commit or Extend
// sends.
func (p *call) Request() Request {
	keys, args := p.split()
	return Request{Script: names[p.script.Hash()], Keys: keys, Args: strs(args)}
}

// PendingRequest returns the call Node.Pending sends for a.
func PendingRequest(a PendingArgs) Request {
	keys, args := a.call()
	return Request{Script: "pending", Keys: keys, Args: strs(args)}
}

// AdmitRequest returns the call Node.Admit sends for a.
func AdmitRequest(a AdmitArgs) Request {
	keys, args := a.call()
	return Request{Script: "admit", Keys: keys, Args: strs(args)}
}

// StateRequest returns the call Node.State sends.
func StateRequest() Request {
	return Request{Script: "state", Keys: []string{MarkerKey, PendingKey}}
}

// ClaimRequest returns the call Node.Claim sends for a.
func ClaimRequest(a ClaimArgs) Request {
	keys, args := a.call()
	return Request{Script: "bootstrap", Keys: keys, Args: strs(args)}
}

// ClaimedRequest returns the call Node.AdmitClaimed sends for a.
func ClaimedRequest(a ClaimedArgs) Request {
	keys, args := a.call()
	return Request{Script: "bootstrap", Keys: keys, Args: strs(args)}
}

// ReconfigureRequest returns the call Node.Reconfigure sends for a.
func ReconfigureRequest(a ReconfigureArgs) Request {
	keys, args := a.call()
	return Request{Script: "reconfigure", Keys: keys, Args: strs(args)}
}

// IdentRequest returns the call Node.Ident sends for fresh.
func IdentRequest(fresh string) Request {
	keys, args := identCall(fresh)
	return Request{Script: "ident", Keys: keys, Args: strs(args)}
}

func (a PendingArgs) call() ([]string, []any) {
	replace := "0"
	if a.Replace {
		replace = "1"
	}
	return []string{MarkerKey, PendingKey}, []any{a.ID, a.Settings, micros(a.Quarantine), a.TTL.Milliseconds(), replace}
}

func (a AdmitArgs) call() ([]string, []any) {
	return []string{MarkerKey, PendingKey}, []any{a.ID, a.Settings}
}

// strs formats arguments as go-redis writes them on the wire.
func strs(args []any) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = v
		case int64, int:
			out[i] = fmt.Sprint(v)
		default:
			panic(fmt.Sprintf("script: argument %v of type %T", a, a))
		}
	}
	return out
}

// Sources returns the Lua text of every script by name ("acquire",
// "admit", ...), as the Client sends it.
func Sources() map[string]string {
	out := make(map[string]string, len(sources))
	for k, v := range sources {
		out[k] = v
	}
	return out
}

// Names lists the scripts by name, sorted.
func Names() []string {
	out := make([]string, 0, len(sources))
	for k := range sources {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ParseAcquire reads an acquire script's reply, given as go-redis returns
// it (int64, string, nil, []any).
func ParseAcquire(res []any) (AcquireReply, error) { return parseAcquire(res) }

// ParseCommit reads a commit script's reply, as ParseAcquire.
func ParseCommit(res []any) (CommitReply, error) { return parseCommit(res) }

// ParseExtend reads the reply to an extend call for n leases, as
// ParseAcquire.
func ParseExtend(res []any, n int) (ExtendReply, error) { return parseExtend(res, n) }

// ParsePending reads a pending script's reply, as ParseAcquire.
func ParsePending(res []any) (PendingReply, error) { return parsePending(res) }

// ParseState reads a state script's reply, as ParseAcquire.
func ParseState(res []any) (State, error) { return parseState(res) }

// Token is the fencing token a lease mints from the acquire replies of its
// round (docs/protocol.md, "The protocol"): one more than the largest fence
// read, at least the largest server time read, over the replies that read
// them (granted, or held by another value). ok is false when the token
// would pass the largest PostgreSQL bigint; fence and floor are what was
// read.
func Token(rs []AcquireReply) (token, fence, floor uint64, ok bool) {
	for _, r := range rs {
		if r.Status >= Held {
			fence = max(fence, r.Fence)
			floor = max(floor, r.TimeUs)
		}
	}
	if fence >= MaxToken || floor > MaxToken {
		return 0, fence, floor, false
	}
	return max(fence+1, floor), fence, floor, true
}

// MaxToken is the largest fencing token: the largest PostgreSQL bigint.
const MaxToken = 1<<63 - 1
