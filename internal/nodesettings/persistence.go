// Package nodesettings judges the Redis settings a lock node's safety
// depends on that more than one tool reads: Client.Check (quorumlock
// check) and quorumlock run say the same thing about them, in the same
// words, from here. It contacts no node.
package nodesettings

import "fmt"

// Risk is one setting under which a node can forget a lock it granted.
type Risk struct {
	Setting string // the setting, as CONFIG SET spells it
	What    string // what was found, worded to follow "node"
	Fix     string // what to do
}

// Persistence judges a node's RDB save points (save, "" for none) and its
// AOF (appendOnly, and fsync, its appendfsync policy). Either can bring a
// restarted node back with its data from before some grants, and such a
// node is admitted at once (it kept its admission marker): it can then
// grant a key that is still held.
func Persistence(save string, appendOnly bool, fsync string) []Risk {
	var out []Risk
	if save != "" {
		out = append(out, Risk{"save",
			fmt.Sprintf("takes RDB snapshots (save %q): a restart from a snapshot brings the node back admitted but without the locks granted after it", save),
			`set save "" (and, to keep data over restarts, appendonly yes with appendfsync always)`})
	}
	if appendOnly && fsync != "always" {
		out = append(out, Risk{"appendfsync",
			"keeps an AOF with appendfsync " + fsync + ": a crash loses its last writes, yet the node comes back admitted",
			"set appendfsync always, or turn persistence off (the node then serves a quarantine after a restart)"})
	}
	return out
}
