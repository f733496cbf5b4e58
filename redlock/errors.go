package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

var (
	// ErrNotObtained reports that a lock was not acquired: another owner
	// holds it, fewer than a majority of nodes answered or were admitted,
	// or the round took so long that no validity was left. The error
	// returned is a *NotObtainedError carrying the reason and the per-node
	// causes; match it with errors.Is.
	ErrNotObtained = errors.New("redlock: lock not obtained")

	// ErrNotHeld reports that Extend or Release found the lease already
	// expired, released, or taken over on a majority of nodes. A lease that
	// returned it must not be used to act as the lock holder.
	ErrNotHeld = errors.New("redlock: lease not held")

	// ErrReleaseUnconfirmed reports that Release could not confirm the
	// delete on a majority of nodes before the cleanup timeout: nodes
	// failed, did not answer in time, or no longer held our value on some
	// of them. The lease is released all the same; a key left on a node
	// expires with its ttl. The error returned is a *ReleaseError, which
	// says until when the key may block other holders.
	ErrReleaseUnconfirmed = errors.New("redlock: release not confirmed by a majority")

	// ErrNodeHeld is the per-node cause when a node's key holds another
	// owner's value.
	ErrNodeHeld = errors.New("held by another owner")

	// errQueued is the per-node cause when the key is free on a node but
	// Lock calls that waited longer are in line for it: a Lock that has
	// not waited yet goes behind them. It matches ErrNodeHeld.
	errQueued = fmt.Errorf("%w: free, but other Lock calls are waiting in line first", ErrNodeHeld)

	// errHandedHere is the per-node cause when a release handed the key
	// to the Lock call itself on that node: it counts towards a lease of
	// the call's own (see Client.handedLease), not towards the attempt's.
	errHandedHere = fmt.Errorf("%w: handed to this Lock call by a release, not to this attempt", ErrNodeHeld)

	// ErrNodeQuarantined is the per-node cause when a node lost its state
	// (restarted without persistence, failed over, flushed) or belongs to a
	// deployment that has not been admitted yet, and may not vote until it
	// has served one quarantine (see Quarantine and Client.Bootstrap).
	ErrNodeQuarantined = errors.New("node is in quarantine: it lost its data or is new")

	// errHeldOff is the per-node cause for a node that a reconfiguration
	// to this client's settings holds off (Client.Reconfigure): it admits
	// itself when the hold-off ends. It matches ErrNodeQuarantined.
	errHeldOff = fmt.Errorf("%w: held off by a reconfiguration to this client's settings", ErrNodeQuarantined)

	// ErrConfigMismatch reports that a node was admitted (or is being
	// admitted) under deployment settings other than this client's: another
	// max ttl, drift factor or number of nodes. Such a client gets no lock
	// from the deployment; fix its options. The error returned is a
	// *ConfigError.
	ErrConfigMismatch = errors.New("redlock: client settings disagree with the deployment's")

	// ErrNodeRefused is the per-node cause (a *RefusalError) when a node
	// refuses this client for a reason of configuration: a wrong password
	// or ACL user, an ACL that denies the scripts, a database index the
	// server does not have, a replica listed as a primary, or a TLS
	// handshake that one side refuses (the node's certificate is not
	// signed by a CA the client trusts, has expired, or is for another
	// name; the node wants a client certificate and gets none, or one it
	// does not accept). Such a node
	// is not briefly down: it fails every call until the client or the
	// node is fixed. New fails when so many nodes refuse its startup probe
	// that fewer than a majority are left, and logs a Warn for each of a
	// minority; later, a refusal counts as a failed vote, and when refusals are why no
	// majority granted, Lock and TryLock return at once with a
	// *NotObtainedError of ReasonRefused, which matches ErrConfigMismatch
	// (and not ErrNotObtained: waiting does not help).
	ErrNodeRefused = errors.New("refused this client")

	// ErrMaxHold is wrapped into Do's error (and the cause of fn's ctx) when
	// the lease ended because WithMaxHold stopped its renewal.
	ErrMaxHold = errors.New("redlock: max hold time reached")

	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errors.New("redlock: client closed")

	// ErrInvalidKey reports a key that no call accepts: empty, or in
	// quorumlock's own namespace (the prefix quorumlock:). The error
	// returned is an *InputError; no node was contacted.
	ErrInvalidKey = errors.New("redlock: invalid key")

	// ErrInvalidTTL reports a ttl that Lock, TryLock, Do and Extend do not
	// accept: not positive, not a whole number of milliseconds, not above
	// its drift, or above the client's max ttl. The error returned is an
	// *InputError; no node was contacted.
	ErrInvalidTTL = errors.New("redlock: invalid ttl")
)

// InputError reports a bad argument to a call: a key or a ttl that the
// call refused before contacting any node, so nothing was taken or lost.
// It is a bug in the caller, not a transient failure: retrying the same
// call fails the same way. One type for both, matched by what was wrong:
// errors.Is(err, ErrInvalidKey) or errors.Is(err, ErrInvalidTTL).
type InputError struct {
	Arg    string        // "key" or "ttl"
	Key    string        // the key given
	TTL    time.Duration // the ttl given (with Arg "ttl")
	Reason string        // what is wrong with it, for people
}

func (e *InputError) Error() string { return "redlock: " + e.Reason }

// Is reports whether target is ErrInvalidKey (for a bad key) or
// ErrInvalidTTL (for a bad ttl).
func (e *InputError) Is(target error) bool {
	return (target == ErrInvalidKey && e.Arg == "key") || (target == ErrInvalidTTL && e.Arg == "ttl")
}

// maxKeyText is how much of a key an error message or a log line shows.
const maxKeyText = 64

// keyText is key as every message of the package shows it: quoted, and
// cut after maxKeyText bytes with its length, so that a huge key (a
// caller's bug, or a payload used as a key) does not flood logs. Errors
// keep the whole key in their fields (NotObtainedError.Key, InputError.Key).
func keyText(key string) string {
	if len(key) <= maxKeyText {
		return strconv.Quote(key)
	}
	cut := maxKeyText
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut-- // do not split a UTF-8 sequence
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(key[:cut]), len(key))
}

// Reason says why an acquisition failed.
type Reason string

// The reasons a *NotObtainedError can carry. They are also the outcome
// attribute of the quorumlock.acquisitions metric.
const (
	ReasonHeld        Reason = "held"         // another owner holds the key on too many nodes
	ReasonNoQuorum    Reason = "no_quorum"    // too few nodes answered in time
	ReasonQuarantine  Reason = "quarantine"   // too few nodes are admitted to vote
	ReasonValidity    Reason = "validity"     // a majority granted, but the round used up the validity
	ReasonFenceCommit Reason = "fence_commit" // the fencing commit round reached too few nodes
	ReasonCancelled   Reason = "cancelled"    // the caller's ctx ended
	ReasonLocal       Reason = "local"        // another Lock of this Client is ahead in line (WithRetry limits)
	ReasonRefused     Reason = "refused"      // nodes refused this client's configuration (ErrNodeRefused): too few were left to grant
)

// NotObtainedError is the error Lock, TryLock and Do return when the lock
// was not acquired. It matches ErrNotObtained with errors.Is, and unwraps
// to the caller's ctx error (for ReasonCancelled) and to one *NodeError
// per node that did not grant, for errors.Is and errors.As. With
// ReasonRefused it matches ErrConfigMismatch instead of ErrNotObtained: a
// client that nodes refuse is misconfigured, and a caller that treats
// ErrNotObtained as "someone else has it, try later" must not skip its
// work forever on a wrong password.
type NotObtainedError struct {
	Key     string
	Reason  Reason
	Granted int // nodes that granted in the last attempt
	Needed  int // the majority
	Nodes   int // nodes in the deployment
	// Replied is how many nodes the last attempt heard from before it was
	// decided: an attempt stops as soon as it has won or cannot win, so
	// when Replied < Nodes the counts in Detail (and the per-node errors)
	// are lower bounds ("at least 3 of 5").
	Replied int
	// Wait estimates how long until enough nodes could be free (the other
	// holder's keys expire or quarantines end); 0 when unknown.
	Wait   time.Duration
	Detail string  // a human-readable account of the last attempt
	Errs   []error // the ctx error, if any, then the per-node errors
}

func (e *NotObtainedError) Error() string {
	msg := fmt.Sprintf("redlock: lock %s not obtained: %s", keyText(e.Key), e.Detail)
	for _, err := range e.Errs {
		msg += "; " + err.Error()
	}
	return msg
}

// Is reports whether target is ErrNotObtained, or with ReasonRefused
// ErrConfigMismatch.
func (e *NotObtainedError) Is(target error) bool {
	if e.Reason == ReasonRefused {
		return target == ErrConfigMismatch
	}
	return target == ErrNotObtained
}

// Unwrap returns the ctx error and the per-node errors.
func (e *NotObtainedError) Unwrap() []error { return e.Errs }

// IsHeld reports whether err says that the lock was not obtained because
// another owner holds the key: a *NotObtainedError of ReasonHeld, or of
// ReasonLocal (another Lock call of this Client is ahead of it). A
// majority of the nodes answered, so the lock service works: a job that
// must not run twice skips this turn, or waits. Compare IsUnavailable.
func IsHeld(err error) bool {
	var e *NotObtainedError
	return errors.As(err, &e) && (e.Reason == ReasonHeld || e.Reason == ReasonLocal)
}

// IsUnavailable reports whether err says that the lock was not obtained
// because the lock service could not grant it, whoever holds the key:
// fewer than a majority of nodes answered (ReasonNoQuorum), too few are
// admitted to vote (ReasonQuarantine: a restart, a new deployment or a
// reconfiguration), the round was too slow for the ttl (ReasonValidity),
// or the fencing commit reached too few nodes (ReasonFenceCommit). This
// is for an alert, not a skip: until it passes, no caller gets the lock.
// A client that nodes refuse is misconfigured instead (ErrConfigMismatch),
// and a cancelled wait (ReasonCancelled) is neither.
func IsUnavailable(err error) bool {
	var e *NotObtainedError
	if !errors.As(err, &e) {
		return false
	}
	switch e.Reason {
	case ReasonNoQuorum, ReasonQuarantine, ReasonValidity, ReasonFenceCommit:
		return true
	}
	return false
}

// NodeErrors returns the per-node errors of the last attempt.
func (e *NotObtainedError) NodeErrors() []*NodeError {
	var out []*NodeError
	for _, err := range e.Errs {
		var ne *NodeError
		if errors.As(err, &ne) {
			out = append(out, ne)
		}
	}
	return out
}

// ReleaseError is what Release returns when fewer than a majority of
// nodes confirmed the delete before the cleanup timeout (or the caller's
// ctx) ran out, and the key may still be held on the nodes that did not
// confirm. It matches ErrReleaseUnconfirmed. The lease is released all the
// same (Done is closed, a second Release returns ErrNotHeld) and safety
// is not at stake: a key left behind on a node expires with its ttl, by
// FreeBy at the latest, and blocks other holders until then. A caller has
// nothing to undo; it may log the error and go on.
type ReleaseError struct {
	Key        string
	Confirmed  int       // nodes that deleted our key
	Gone       int       // nodes where the key no longer held our value (expired or taken over)
	Unanswered int       // nodes not heard from when Release judged: too late, or after a majority became impossible
	Needed     int       // the majority
	Nodes      int       // nodes in the deployment
	FreeBy     time.Time // when the key has expired on every node, on the client's clock
	Errs       []error   // the ctx error, if any, then one *NodeError per node that failed
}

func (e *ReleaseError) Error() string {
	msg := fmt.Sprintf("redlock: release of %s confirmed by %d of %d nodes (%d needed); the rest expire with the ttl, by %s at the latest",
		keyText(e.Key), e.Confirmed, e.Nodes, e.Needed, e.FreeBy.Format("15:04:05.000"))
	if e.Gone > 0 {
		msg += fmt.Sprintf("; the key no longer held our value on %d", e.Gone)
	}
	if e.Unanswered > 0 {
		msg += fmt.Sprintf("; %d not heard from", e.Unanswered)
	}
	for _, err := range e.Errs {
		msg += "; " + err.Error()
	}
	return msg
}

// Is reports whether target is ErrReleaseUnconfirmed.
func (e *ReleaseError) Is(target error) bool { return target == ErrReleaseUnconfirmed }

// Unwrap returns the ctx error and the per-node errors.
func (e *ReleaseError) Unwrap() []error { return e.Errs }

// ErrNotNew is the reason Bootstrap admits nothing: the deployment shows
// signs of use (a node carries an admission marker or a quarantine in
// progress), so a node without its marker may have lost locks that are
// still trusted, and it must serve its quarantine. Bootstrap returns it
// wrapped in a *NotNewError that says which nodes and for how long.
var ErrNotNew = errors.New("redlock: the deployment is in use (a node carries an admission marker or a quarantine in progress): Bootstrap admits nothing")

// NotNewError is Bootstrap's refusal on a deployment in use: the nodes not
// admitted with this client's settings, each with its quarantine started
// (if it was not already) and the time left. It matches ErrNotNew.
type NotNewError struct {
	Nodes []QuarantinedNode
}

// QuarantinedNode is one node that serves its quarantine.
type QuarantinedNode struct {
	Node int
	Addr string
	Left time.Duration // until its quarantine ends on the node's clock; 0 when unknown (Err)
	Err  error         // why the node's quarantine could not be read or started
}

func (e *NotNewError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNotNew.Error())
	b.WriteString("; not admitted yet:")
	for i, n := range e.Nodes {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " node %d (%s) ", n.Node, n.Addr)
		if n.Err != nil {
			fmt.Fprintf(&b, "quarantine unknown: %v", n.Err)
		} else {
			fmt.Fprintf(&b, "quarantine ends in %v", n.Left.Round(time.Millisecond))
		}
	}
	b.WriteString(" (the nodes are admitted by themselves when it ends; waiting is the remedy)")
	return b.String()
}

func (e *NotNewError) Is(target error) bool { return target == ErrNotNew }
