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
	x.init(commitScript, []any{a.Key, FenceKey(a.Key)}, a.Value, strconv.FormatUint(a.Token, 10), a.Keep.Milliseconds())
	return x
}

// Run sends the call to n. It reports whether the node still held Value
// (and its fence is at least Token now).
func (x *Commit) Run(ctx context.Context, n *Node) (bool, error) {
	v, err := n.do(ctx, &x.call).Int64()
	return v == 1, err
}
