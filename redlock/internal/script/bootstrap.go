package script

import (
	"context"
	_ "embed"
	"time"
)

//go:embed bootstrap.lua
var bootstrapSrc string

var bootstrapScript = newScript("bootstrap", bootstrapSrc)

// ClaimArgs is Bootstrap's first step on a node (bootstrap.lua, claim):
// a pending mark of Bootstrap's own.
type ClaimArgs struct {
	Settings   string
	ID         string        // the Bootstrap's id
	Quarantine time.Duration // the mark's quarantine (rounded up to µs)
	TTL        time.Duration // how long the mark lives, whole ms
}

// ClaimedArgs is Bootstrap's second step (bootstrap.lua, admit): admit a
// node that still carries the claim ID, no older than Window.
type ClaimedArgs struct {
	Settings string
	ID       string
	Window   time.Duration // rounded up to µs
}

// BootstrapStatus is the bootstrap script's answer.
type BootstrapStatus int64

const (
	BootstrapDone     BootstrapStatus = 1  // claimed, or admitted now
	BootstrapAlready  BootstrapStatus = 2  // already admitted with these settings
	BootstrapRefused  BootstrapStatus = -1 // claim: someone else's pending mark; admit: the claim is gone or too old
	BootstrapMismatch BootstrapStatus = -2 // admitted under other settings
)

// Claim runs the claim step on n.
func (n *Node) Claim(ctx context.Context, a ClaimArgs) (BootstrapStatus, error) {
	keys, args := a.call()
	v, err := asInt64(bootstrapScript.Run(ctx, n.conn, keys, args...))
	return BootstrapStatus(v), err
}

// AdmitClaimed runs the admit step on n.
func (n *Node) AdmitClaimed(ctx context.Context, a ClaimedArgs) (BootstrapStatus, error) {
	keys, args := a.call()
	v, err := asInt64(bootstrapScript.Run(ctx, n.conn, keys, args...))
	return BootstrapStatus(v), err
}

func (a ClaimArgs) call() ([]string, []any) {
	return []string{MarkerKey, PendingKey}, []any{"claim", a.Settings, a.ID, micros(a.Quarantine), a.TTL.Milliseconds()}
}

func (a ClaimedArgs) call() ([]string, []any) {
	return []string{MarkerKey, PendingKey}, []any{"admit", a.Settings, a.ID, micros(a.Window)}
}

// BootstrapUse is how Client.Bootstrap reads the admission states of
// every node (states, in node order, none admitted under other
// settings) for a client with settings: the nodes without its marker,
// and whether the deployment shows signs of use, that is, a node
// admitted with these settings, a quarantine in progress, or a
// reconfiguration to these settings (docs/protocol.md, "Bootstrap"). Bootstrap claims every node only when
// some node is unmarked and none shows use; with signs of use it starts
// the unmarked nodes' ordinary quarantine instead. The model checker
// (redlock/internal/model) decides with it too.
func BootstrapUse(states []State, settings string) (unmarked []int, used bool) {
	for i, s := range states {
		switch {
		case s.Marker == settings:
			used = true
		case s.Marker == Moving(settings):
			// Held off by a reconfiguration: it admits itself when the
			// hold-off ends, and a client that calls Bootstrap at every
			// start waits like the others.
			used = true
			unmarked = append(unmarked, i)
		case s.Pending != "":
			used = true
			unmarked = append(unmarked, i)
		default:
			unmarked = append(unmarked, i)
		}
	}
	return unmarked, used
}
