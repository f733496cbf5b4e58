package script

import (
	"context"
	_ "embed"
	"strconv"
	"time"
)

//go:embed commit.lua
var commitSrc string

var commitScript = newScript("commit", commitSrc)

// CommitArgs is a fencing commit (commit.lua): raise Key's fence to Token
// where Key still holds Value.
type CommitArgs struct {
	Key   string
	Value string
	Token uint64
	Keep  time.Duration // how long the fence is kept at least, whole ms
}

// Commit is a prepared commit call.
type Commit struct{ call }

// NewCommit prepares a's call.
func NewCommit(a CommitArgs) *Commit {
	x := &Commit{}
	x.init(commitScript, []any{a.Key, FenceKey(a.Key), IdentKey}, a.Value, strconv.FormatUint(a.Token, 10), a.Keep.Milliseconds())
	return x
}

// CommitReply is a node's answer to a commit call.
type CommitReply struct {
	// Committed: the node still held Value, and its fence is at least
	// Token now.
	Committed bool
	// Ident is the identity of the server that ran the call, as
	// AcquireReply's.
	Ident string
}

// Run sends the call to n.
func (x *Commit) Run(ctx context.Context, n *Node) (CommitReply, error) {
	v, err := asSlice(n.do(ctx, &x.call))
	if err != nil {
		return CommitReply{}, err
	}
	return parseCommit(v)
}

func parseCommit(res []any) (CommitReply, error) {
	if len(res) != 2 {
		return CommitReply{}, malformed("commit script returned %d values", len(res))
	}
	ok, ok1 := res[0].(int64)
	id, ok2 := res[1].(string)
	if !ok1 || !ok2 {
		return CommitReply{}, malformed("commit script returned %T, %T", res[0], res[1])
	}
	return CommitReply{Committed: ok == 1, Ident: id}, nil
}
