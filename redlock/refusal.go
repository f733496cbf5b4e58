package redlock

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Replies that say a node will not serve this client as configured. They
// are configuration, not contention or availability: the node answers
// every call the same way until someone fixes the client's options or the
// node's. Each was reproduced against redis-server 7 (requirepass, ACL
// SETUSER without +@scripting, databases 1 with DB 3, replicaof).
var refusals = []struct {
	prefix  string // of the reply's text
	problem string // what to check, for RefusalError's message
}{
	{"WRONGPASS", "wrong password or ACL user"},
	{"NOAUTH", "the node requires a password"},
	{"ERR AUTH", "a password was sent to a node that has none"},
	{"ERR invalid password", "wrong password"},
	{"ERR invalid username-password pair", "wrong password or ACL user"},
	{"NOPERM", "the ACL user may not run quorumlock's scripts"},
	{"ERR DB index is out of range", "the node has no such database"},
	{"ERR unknown command 'eval", "scripting is disabled or renamed on the node"},
	{"READONLY", "the node is a replica, not a primary"},
}

// RefusalError is the per-node cause when a node refused this client for
// a reason of configuration (see ErrNodeRefused, which it matches). Err is
// the node's reply.
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

// refusal returns err as a *RefusalError when it is a reply that refuses
// the client's configuration, and nil otherwise.
func refusal(err error) *RefusalError {
	if err == nil {
		return nil
	}
	var re *RefusalError
	if errors.As(err, &re) {
		return re
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return nil
	}
	msg := rerr.Error()
	for _, r := range refusals {
		if strings.HasPrefix(msg, r.prefix) {
			return &RefusalError{Problem: r.problem, Err: err}
		}
	}
	return nil
}

// typed returns err with a refusal typed as a *RefusalError: the cause
// every per-node error of this client carries.
func typed(err error) error {
	if re := refusal(err); re != nil {
		return re
	}
	return err
}
