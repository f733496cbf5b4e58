package model

import (
	"fmt"
	"time"

	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// admissionSteps drive client c's admission of the nodes that answered
// "not admitted": the pending script starts (or reads) the node's
// quarantine, the admit script ends it. The model sends each at any
// moment, which covers every delay the library's admission may take
// (admission.go's step); the scripts alone decide.
// Not modelled: the peers' check (confirm), which Theorem 4 needs and
// Theorem 3 does not; with a single data loss no other settings can
// reach a majority anyway.
func (m *machine) admissionSteps(s *state, c int, emit func(step)) {
	cl := s.clients[c]
	cc := m.cfg.Clients[c]
	if cc.NoQuarantine {
		return
	}
	if m.cfg.Confirm {
		m.checkSteps(s, c, emit)
		return
	}
	for i := 0; i < m.size[c]; i++ {
		bit := uint8(1) << i
		if cl.unadmitted&bit == 0 || cl.admitting&bit != 0 {
			continue
		}
		t := s.clone()
		tc := &t.clients[c]
		var req script.Request
		var what string
		if cl.mark[i] == "" {
			if cl.pendings >= m.cfg.Pendings {
				continue
			}
			tc.pendings++
			id := fmt.Sprintf("p%d.%d", c, tc.pendings)
			req = script.PendingRequest(script.PendingArgs{ID: id, Settings: m.sigma[c], Quarantine: m.quar[c],
				TTL: 2*m.quar[c] + time.Second})
			what = fmt.Sprintf("client %d sends pending (id %s) to node %d", c, id, i)
		} else {
			req = script.AdmitRequest(script.AdmitArgs{ID: cl.mark[i], Settings: m.sigma[c]})
			what = fmt.Sprintf("client %d sends admit (mark %s) to node %d", c, cl.mark[i], i)
		}
		tc.admitting |= bit
		t.msgs = append(t.msgs, newMsg(msg{client: c, node: i, req: req}))
		emit(step{func() string { return what }, t})
	}
}
