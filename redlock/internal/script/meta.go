package script

import (
	"context"
	_ "embed"
)

//go:embed meta.lua
var metaSrc string

var metaScript = newScript("meta", metaSrc)

// MetaArgs stores Metadata for the holder of Key whose value is Value
// (meta.lua), where the key holds it.
type MetaArgs struct {
	Key      string
	Value    string
	Metadata string
}

// Meta is a prepared metadata call.
type Meta struct{ call }

// NewMeta prepares a's call.
func NewMeta(a MetaArgs) *Meta {
	x := &Meta{}
	x.init(metaScript, []any{a.Key, MetaKey(a.Key)}, a.Value, a.Metadata)
	return x
}

// Run sends the call to n. It reports whether the node's key held Value
// and now has the metadata.
func (x *Meta) Run(ctx context.Context, n *Node) (bool, error) {
	v, err := asInt64(n.do(ctx, &x.call))
	return v == 1, err
}
