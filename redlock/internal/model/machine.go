package model

import (
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// lockKey is the one key the clients of the single-key scenarios contend
// for (a LockAll's parts lock keys of their own: multikey.go).
const lockKey = "k"

// machine holds what every state of one exploration shares: the
// configuration, each client's settings, and the interpreter.
type machine struct {
	cfg   Config
	q     int
	sigma []string         // per client: its settings σ
	size  []int            // per client: the entries of its node list
	qc    []int            // per client: a majority of its entries
	quar  []time.Duration  // per client: its quarantine Q(σ)
	known map[string]known // the settings the scenario uses (knownSettings)
	lua   *interp
	boxes script.Boxes
	// perms[k] lists the orders of k things, for canonical.
	perms [][][]int
	// solo lifts the bounds on a client's attempts and checks, for the
	// liveness checks' runs of one client alone.
	solo bool
	// enc is canonical's buffer for a state's encoding, reused.
	enc []byte
	// The keys (multikey.go): per client, the key it locks and its
	// LockAll (-1: none); per LockAll, its parts in the order it takes
	// them; and every key some client locks.
	key     []string
	setOf   []int
	sets    [][]int
	keyList []string
}

func newMachine(cfg Config) (*machine, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	in, err := newInterp(cfg.Patches)
	if err != nil {
		return nil, err
	}
	cfg = expandSets(cfg)
	m := &machine{cfg: cfg, q: cfg.quorum(), lua: in}
	m.initSets()
	if m.known, err = knownSettings(cfg); err != nil {
		return nil, err
	}
	for k := 0; k <= cfg.Nodes; k++ {
		m.perms = append(m.perms, perms(k))
	}
	for _, cc := range cfg.Clients {
		q, err := script.CheckedQuarantine(cc.MaxTTL, cc.Factor)
		if err != nil {
			return nil, err
		}
		m.sigma = append(m.sigma, cc.settings(cc.entries(cfg.Nodes)))
		m.quar = append(m.quar, q)
		m.size = append(m.size, cc.entries(cfg.Nodes))
		m.qc = append(m.qc, quorum.Majority(cc.entries(cfg.Nodes)))
	}
	return m, nil
}

func (m *machine) initial() *state {
	n, c := m.cfg.Nodes, len(m.cfg.Clients)
	s := &state{ahead: make([]int, n+c), nodes: make([]keyspace, n), clients: make([]client, c), ident: m.initialIdent()}
	for i := range s.nodes {
		s.nodes[i] = keyspace{}
		for k, v := range m.cfg.Keys[i] {
			s.nodes[i][k] = &entry{kind: 's', str: v}
		}
		// The identity the clients' probes read (identity.go).
		s.nodes[i][script.IdentKey] = &entry{kind: 's', str: nodeID(i)}
	}
	if m.cfg.Admitted {
		for e := 0; e < m.size[0]; e++ {
			s.nodes[m.serverOf(0, e)][script.MarkerKey] = &entry{kind: 's', str: m.sigma[0]}
		}
	}
	return s
}
