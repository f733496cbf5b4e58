package model

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// known is a settings string the scenario uses: its quarantine and node
// count, for a run that reads the old settings.
type known struct {
	quar  time.Duration
	nodes int
}

// knownSettings are the settings of the scenario's clients and runs.
func knownSettings(cfg Config) (map[string]known, error) {
	out := map[string]known{}
	add := func(cc ClientConfig, nodes int) error {
		q, err := script.CheckedQuarantine(cc.MaxTTL, cc.Factor)
		if err != nil {
			return err
		}
		out[cc.settings(nodes)] = known{q, nodes}
		return nil
	}
	for _, cc := range cfg.Clients {
		if err := add(cc, cc.entries(cfg.Nodes)); err != nil {
			return nil, err
		}
	}
	for _, rc := range cfg.Reconfigs {
		if rc.ReadFrom {
			continue
		}
		if err := add(ClientConfig{MaxTTL: rc.MaxTTL, Factor: rc.Factor}, len(rc.From)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readFrom is the look's reading of the old settings for a run with
// ReadFrom (redlock's oldFromLooks): enough old nodes answered, those that
// say anything (script.ReconfigureOldSettingsOf) say the same, for as many
// nodes as the old list has. It sets tr.read, or says why the run fails.
func (m *machine) readFrom(tr *reconfigurer, olds []int, need int) string {
	if count(tr.looked[0]) < need {
		return fmt.Sprintf("%d old nodes answered, %d must: incomplete, nothing written", count(tr.looked[0]), need)
	}
	to := m.sigma[m.cfg.Reconfigs[tr.run].To]
	read := ""
	for e := range olds {
		if tr.looked[0]&(1<<e) == 0 {
			continue
		}
		v := script.ReconfigureOldSettingsOf(tr.marker[0][e], tr.trace[0][e], to)
		if m.cfg.OldFromMarks {
			v = settingsNamedBy(tr.marker[0][e])
		}
		switch {
		case v == "":
		case read == "":
			read = v
		case v != read:
			return fmt.Sprintf("the old nodes record %q and %q: refused, nothing written", read, v)
		}
	}
	kn, ok := m.known[read]
	switch {
	case read == "":
		return "no old node that answered records its settings: refused, nothing written"
	case !ok:
		panic(fmt.Sprintf("model: a node carries %q, which no client or run of the scenario has", read))
	case kn.nodes != len(olds):
		return fmt.Sprintf("the old nodes were admitted with %d nodes, %d given: refused, nothing written", kn.nodes, len(olds))
	}
	tr.read = read
	return ""
}

// settingsNamedBy is the settings a marker names, a change's marks read
// as the settings they move to (Config.OldFromMarks).
func settingsNamedBy(marker string) string {
	if to, ok := script.MovingTo(marker); ok {
		return to
	}
	if to, ok := script.RetiredTo(marker); ok {
		return to
	}
	return marker
}
