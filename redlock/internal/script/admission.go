package script

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"time"
)

var (
	//go:embed pending.lua
	pendingSrc string
	//go:embed admit.lua
	admitSrc string

	pendingScript = newScript("pending", pendingSrc)
	admitScript   = newScript("admit", admitSrc)
)

// Quarantine is a pending mark's timing, in µs on the node's clock.
type Quarantine struct {
	Stamp  int64 // when the quarantine started
	Length int64 // how long it lasts
	Now    int64 // when the node answered
}

// Left is how much of the quarantine was left when the node answered; 0
// or less: it is over.
func (q Quarantine) Left() time.Duration {
	return time.Duration(q.Length-(q.Now-q.Stamp)) * time.Microsecond
}

// PendingArgs starts (or reads) a node's quarantine (pending.lua).
type PendingArgs struct {
	ID         string        // a fresh random id for a new pending mark
	Settings   string        // the client's settings
	Quarantine time.Duration // how long the quarantine lasts (rounded up to µs)
	TTL        time.Duration // how long the mark lives, whole ms
	// Replace replaces a mark started with other settings: the caller
	// has seen peers admitted with its own.
	Replace bool
}

// PendingReply is a node's admission state after the pending script.
type PendingReply struct {
	Marker string // the node's admission marker; "" when it has none
	// Without a marker: the node's pending mark.
	ID         string
	Settings   string
	Quarantine Quarantine
}

// Pending runs the pending script on n.
func (n *Node) Pending(ctx context.Context, a PendingArgs) (PendingReply, error) {
	keys, args := a.call()
	res, err := asSlice(pendingScript.Run(ctx, n.conn, keys, args...))
	if err != nil {
		return PendingReply{}, err
	}
	return parsePending(res)
}

func parsePending(res []any) (p PendingReply, err error) {
	if len(res) < 2 {
		return p, malformed("pending script returned %d values", len(res))
	}
	if st, _ := res[0].(int64); st == 1 {
		p.Marker, _ = res[1].(string)
		return p, nil
	}
	if len(res) != 6 {
		return p, malformed("pending script returned %d values", len(res))
	}
	p.ID, p.Settings = text(res[1]), text(res[3])
	var e1, e2, e3 error
	p.Quarantine.Stamp, e1 = strconv.ParseInt(text(res[2]), 10, 64)
	p.Quarantine.Length, e2 = strconv.ParseInt(text(res[4]), 10, 64)
	p.Quarantine.Now, e3 = strconv.ParseInt(text(res[5]), 10, 64)
	if err := errors.Join(e1, e2, e3); err != nil {
		return PendingReply{}, malformed("pending mark %v is malformed: %w", res, err)
	}
	return p, nil
}

func text(v any) string { s, _ := v.(string); return s }

// AdmitArgs admits a node whose quarantine is over (admit.lua).
type AdmitArgs struct {
	ID       string // the pending mark's id, as the pending script read it
	Settings string
}

// AdmitStatus is the admit script's answer.
type AdmitStatus int64

const (
	Admitted    AdmitStatus = 1  // admitted, now or before, with these settings
	NotAdmitted AdmitStatus = 0  // the mark is gone, is another one, or is too young
	AdmittedAs  AdmitStatus = -2 // admitted under other settings
)

// Admit runs the admit script on n.
func (n *Node) Admit(ctx context.Context, a AdmitArgs) (AdmitStatus, error) {
	keys, args := a.call()
	v, err := asInt64(admitScript.Run(ctx, n.conn, keys, args...))
	return AdmitStatus(v), err
}

// Peer is how a client reads one peer's admission state (State) before it
// admits a node whose quarantine is over (admission.go's confirm).
type Peer int

const (
	PeerBare         Peer = iota // no marker, and no quarantine with other settings
	PeerAdmitted                 // admitted with the client's settings
	PeerMoving                   // held off by a reconfiguration to the client's settings
	PeerOther                    // carries another marker (other settings, a reconfiguration's)
	PeerPendingOther             // a quarantine in progress with other settings
)

// ReadPeer reads a peer's state for a client with settings.
func ReadPeer(st State, settings string) Peer {
	to, moving := MovingTo(st.Marker)
	switch {
	case st.Marker == settings:
		return PeerAdmitted
	case moving && to == settings:
		return PeerMoving
	case st.Marker != "":
		return PeerOther
	case st.Pending != "" && st.Pending != settings:
		return PeerPendingOther
	}
	return PeerBare
}

// Confirmation is the peers' verdict on admitting a node.
type Confirmation int

const (
	ConfirmWait     Confirmation = iota // not decided: a peer did not answer, or is held off
	ConfirmAdmitted                     // a peer is admitted with the client's settings
	ConfirmFirst                        // the first admission of a deployment: every peer answered bare
	ConfirmConflict                     // a peer carries other settings
)

// Confirm is the rule of the peers' check before a node whose quarantine
// is over is admitted (docs/protocol.md, Theorem 4): peers are the readings
// of the peers that answered (in any order), of peers in all. Some peer
// already admitted with the client's settings admits; otherwise a peer
// with other settings refuses; otherwise, for the first admission of a
// deployment, every peer must have answered bare. redlock's admission.go
// applies it; the model checker (redlock/internal/model) decides with it
// too.
func Confirm(peers []Peer, all int) Confirmation {
	conflict, bare := false, 0
	for _, p := range peers {
		switch p {
		case PeerAdmitted:
			return ConfirmAdmitted
		case PeerOther, PeerPendingOther:
			conflict = true
		case PeerBare:
			bare++
		}
	}
	switch {
	case conflict:
		return ConfirmConflict
	case bare == all:
		return ConfirmFirst
	}
	return ConfirmWait
}
