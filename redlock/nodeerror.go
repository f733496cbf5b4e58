package redlock

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// The per-node errors: one node's part in a failed call (NodeError), and
// the causes that say the client's configuration is wrong for the node
// (ConfigError, RefusalError, DuplicateNodeError).

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

// RefusalError is the per-node cause when a node refused this client for
// a reason of configuration (see ErrNodeRefused, which it matches). Err is
// the node's reply, or the TLS error of the handshake that failed.
type RefusalError struct {
	Problem string // what to check, in a few words
	Err     error
}

func (e *RefusalError) Error() string {
	return "refused this client (" + e.Problem + "): " + e.Err.Error()
}

// Is reports whether target is ErrNodeRefused.
func (e *RefusalError) Is(target error) bool { return target == ErrNodeRefused }

func (e *RefusalError) Unwrap() error { return e.Err }

// DuplicateNodeError reports two entries of a client's node list that
// reach the same Redis server. It matches ErrConfigMismatch: the client
// is misconfigured and gets no lock until it is built with a list that
// names each server once.
type DuplicateNodeError struct {
	Node, Other     int
	Addr, OtherAddr string
}

func (e *DuplicateNodeError) Error() string {
	return fmt.Sprintf("redlock: nodes %d (%s) and %d (%s) are the same Redis server: list each server once (its vote would count twice)",
		e.Node, e.Addr, e.Other, e.OtherAddr)
}

func (e *DuplicateNodeError) Is(target error) bool { return target == ErrConfigMismatch }

// errAttr is err as a log attribute. A round's error joins a summary with
// one *NodeError per node, and logged as one attribute its lines would run
// together; it is logged as "err" (the summary: the joined errors that are
// not a *NodeError) and a group "nodes" with one attribute per node, keyed
// by the node's index (an attribute group with no key of its own, which
// handlers inline).
func errAttr(err error) slog.Attr {
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return slog.Any("err", err)
	}
	var summary []string
	var nodes []any
	for _, e := range joined.Unwrap() {
		var ne *NodeError
		if errors.As(e, &ne) {
			v := ne.Err.Error()
			if ne.Addr != "" {
				v = ne.Addr + ": " + v
			}
			nodes = append(nodes, slog.String(strconv.Itoa(ne.Node), v))
			continue
		}
		summary = append(summary, e.Error())
	}
	attrs := []any{slog.String("err", strings.Join(summary, "; "))}
	if len(nodes) > 0 {
		attrs = append(attrs, slog.Group("nodes", nodes...))
	}
	return slog.Group("", attrs...)
}
