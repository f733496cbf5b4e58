// Package model implements an explicit-state explorer of the lock
// protocol: every interleaving, up to a depth bound, of a small
// deployment (nodes, clients, messages on the wire, clocks, data losses),
// each distinct state once, stopping at the first state that breaks an
// invariant with the shortest run that reaches it.
//
// The nodes run the real scripts of redlock/internal/script in an
// embedded Lua interpreter (gopher-lua) over an in-memory key space whose
// expiries and TIME follow each node's model clock; the clients send the
// calls the script package prepares and decide with the library's own
// rules where they are functions (quorum, drift, script.Token). What the
// explorer models of the client itself is listed in docs/model.md and in
// steps.go, attempt.go, extend.go and admission.go.
//
// Explore runs one Config; Scenarios are the configurations the tests
// and `make model` run. Nothing here is safe for concurrent use: one
// exploration per goroutine.
package model
