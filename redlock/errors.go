package redlock

import (
	"errors"
	"fmt"
	"time"
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

	// ErrConfigMismatch reports that a node was admitted (or is being
	// admitted) under deployment settings other than this client's: another
	// max ttl, drift factor or number of nodes. Such a client gets no lock
	// from the deployment; fix its options. The error returned is a
	// *ConfigError.
	ErrConfigMismatch = errors.New("redlock: client settings disagree with the deployment's")

	// ErrNodeRefused is the per-node cause (a *RefusalError) when a node
	// refuses this client for a reason of configuration: a wrong password
	// or ACL user, an ACL that denies the scripts, a database index the
	// server does not have, or a replica listed as a primary. Such a node
	// is not briefly down: it fails every call until the client or the
	// node is fixed. New fails when a node refuses its startup probe; later,
	// a refusal counts as a failed vote, and when refusals are why no
	// majority granted, Lock and TryLock return at once with a
	// *NotObtainedError of ReasonRefused, which matches ErrConfigMismatch
	// (and not ErrNotObtained: waiting does not help).
	ErrNodeRefused = errors.New("refused this client")

	// ErrMaxHold is wrapped into Do's error (and the cause of fn's ctx) when
	// the lease ended because WithMaxHold stopped its renewal.
	ErrMaxHold = errors.New("redlock: max hold time reached")

	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errors.New("redlock: client closed")
)

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
	// Wait estimates how long until enough nodes could be free (the other
	// holder's keys expire or quarantines end); 0 when unknown.
	Wait   time.Duration
	Detail string  // a human-readable account of the last attempt
	Errs   []error // the ctx error, if any, then the per-node errors
}

func (e *NotObtainedError) Error() string {
	msg := fmt.Sprintf("redlock: lock %q not obtained: %s", e.Key, e.Detail)
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

// ConfigError reports a node whose deployment settings differ from the
// client's. It matches ErrConfigMismatch with errors.Is.
//
// A node that refuses the client outright (a wrong password, say) is
// reported as a *RefusalError, which matches ErrNodeRefused: the client's
// own configuration is wrong there, not its agreement with the
// deployment's settings.
type ConfigError struct {
	Node       int
	Addr       string
	Deployment string // the settings the node keeps (or is being admitted with)
	Client     string // this client's settings
	Pending    bool   // Deployment comes from a quarantine in progress, not an admitted node
}

func (e *ConfigError) Error() string {
	what := "was admitted with"
	if e.Pending {
		what = "is being admitted with"
	}
	return fmt.Sprintf("redlock: node %d (%s) %s %q but this client has %q: every client of a deployment must use the same nodes, WithMaxTTL and WithDriftFactor",
		e.Node, e.Addr, what, e.Deployment, e.Client)
}

// Is reports whether target is ErrConfigMismatch.
func (e *ConfigError) Is(target error) bool { return target == ErrConfigMismatch }

// NodeError is one node's part in a failed round. Err is the transport
// error (when a call ran out of time, the node's last transport error
// joined with the context error), a *RefusalError (ErrNodeRefused),
// ErrNodeHeld, ErrNodeQuarantined or a context error. Match it with
// errors.As; it unwraps to Err.
type NodeError struct {
	Node int    // index of the node in the slice given to New
	Addr string // the node's address, when the client knows it
	Err  error
}

func (e *NodeError) Error() string {
	if e.Addr != "" {
		return fmt.Sprintf("redlock: node %d (%s): %v", e.Node, e.Addr, e.Err)
	}
	return fmt.Sprintf("redlock: node %d: %v", e.Node, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }
