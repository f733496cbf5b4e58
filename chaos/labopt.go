package chaos

import (
	"github.com/quorumlock/quorumlock/internal/labopt"
	"github.com/quorumlock/quorumlock/redlock"
)

// withoutQuarantine is redlock's lab switch that lets a node restarted empty
// vote at once: the no-quarantine twin of the restart faults, which shows
// what the quarantine prevents. Unsafe anywhere else.
func withoutQuarantine() redlock.Option {
	return labopt.WithoutRestartQuarantine.(func() redlock.Option)()
}
