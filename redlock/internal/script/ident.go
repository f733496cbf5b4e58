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
	return identScript.Run(ctx, n.uc, []string{IdentKey}, fresh).Text()
}
