// Package labopt reaches redlock's lab switches: options that take one of
// its safety guards out, so that the chaos suite and the tests can show,
// with numbers, what the guard prevents. They are no part of redlock's
// API. This package is internal to the quorumlock module tree, so a
// service cannot import it, and no client is built without a guard by
// mistake or by a search for "the option that makes it faster".
//
// Package redlock sets each switch when it is initialized, as a function
// that returns a redlock.Option (this package cannot name the type: redlock
// imports it). Callers convert it once, in a helper of their own.
package labopt

// WithoutRestartQuarantine, set by package redlock, is a
// func() redlock.Option that lets a node that restarted empty vote at
// once. Unsafe: a restarted node can grant a lock that is still held
// (docs/protocol.md, "The restart quarantine: no double grant from any
// client setup"); the chaos suite's no-quarantine twin and the tests that
// show the quarantine is needed use it.
var WithoutRestartQuarantine any
