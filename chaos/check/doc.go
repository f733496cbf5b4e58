// Package check holds the chaos suite's verdicts: what must never happen
// to a lock and the resource it guards, computed from a run's history.
//
// Every function here is pure: it takes the critical sections the workers
// recorded (and the tokens the resource accepted, in commit order) and
// counts violations, with no servers, clocks or randomness involved, so
// each verdict can be tested on a hand-written history and reused on any
// recorded one. Linearizable checks the lock history against a mutex model
// with porcupine.
package check
