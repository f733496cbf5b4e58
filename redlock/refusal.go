package redlock

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/quorumlock/quorumlock/redlock/driver"
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
	// redis-server 7 answers a request of more than 10 arguments (or a
	// long one) from a connection that has not authenticated with this
	// instead of NOAUTH, and closes the connection: an acquire is one.
	{"ERR Protocol error: unauthenticated", "the node requires a password"},
	{"ERR AUTH", "a password was sent to a node that has none"},
	{"ERR invalid password", "wrong password"},
	{"ERR invalid username-password pair", "wrong password or ACL user"},
	{"NOPERM", "the ACL user may not run quorumlock's scripts"},
	// A command a script runs that the ACL denies (a command, a key or a
	// channel): redis-server 7 answers the script with this error, not
	// NOPERM.
	{"ERR The user executing the script can't", "the ACL user may not run a command, key or channel quorumlock's scripts use"},
	{"ERR DB index is out of range", "the node has no such database"},
	{"ERR unknown command 'eval", "scripting is disabled or renamed on the node"},
	{"READONLY", "the node is a replica, not a primary"},
}

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
	if problem := tlsRefusal(err); problem != "" {
		return &RefusalError{Problem: problem, Err: err}
	}
	var rerr driver.Error
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

// TLS handshakes that fail for a reason of configuration: a certificate
// that one side does not accept, or a node that does not speak TLS on the
// port. Like the replies above they fail every connection the same way
// until someone fixes a certificate or an option, so they are refusals:
// retrying them as a node that is briefly down made Lock wait for its ctx
// and the CLI say "try later". Each certificate case was reproduced
// against redis-server 7 with certificates made by internal/testenv
// (tls_test.go). The record-header case is a server that answers the
// handshake with something other than TLS.
//
// Not among them, because nothing tells them from a node that is down: a
// plain client on a TLS port (redis-server drops the connection: EOF), and
// a TLS client on a plain port (redis-server waits for the end of an
// inline command that never comes: the call times out).

// tlsAlerts are the alerts a node sends when it refuses the client's
// certificate or the TLS parameters it offered, by the text crypto/tls
// gives them (its alert type is not exported: a failed handshake reads as
// a *net.OpError of Op "remote error").
var tlsAlerts = []struct {
	text    string
	problem string
}{
	{"tls: certificate required", "the node requires a client certificate (mTLS) and none was sent"},
	{"tls: unknown certificate authority", "the node does not trust the CA of this client's certificate"},
	{"tls: expired certificate", "the node refused this client's certificate as expired or not yet valid"},
	{"tls: bad certificate", "the node refused this client's certificate"},
	{"tls: unsupported certificate", "the node refused this client's certificate"},
	{"tls: revoked certificate", "the node refused this client's certificate as revoked"},
	{"tls: unknown certificate", "the node refused this client's certificate"},
	{"tls: access denied", "the node refused this client's certificate"},
	{"tls: handshake failure", "the node refused the TLS handshake (versions, ciphers or certificate)"},
	{"tls: protocol version not supported", "the node and this client share no TLS version"},
	{"tls: insufficient security level", "the node refused this client's TLS parameters"},
}

// tlsRefusal returns what to check when err is a TLS handshake that
// failed for a reason of configuration, and "" otherwise.
func tlsRefusal(err error) string {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		verify    *tls.CertificateVerificationError
		header    tls.RecordHeaderError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &unknownCA):
		return "the node's certificate is not signed by a CA this client trusts"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "the node's certificate has expired or is not yet valid"
	case errors.As(err, &invalid):
		return "the node's certificate is not valid for this use"
	case errors.As(err, &hostname):
		return "the node's certificate is not for the server name this client verifies"
	case errors.As(err, &verify):
		return "the node's certificate failed verification"
	case errors.As(err, &header):
		return "the node does not speak TLS on this port"
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil:
		msg := op.Err.Error()
		for _, a := range tlsAlerts {
			if msg == a.text {
				return a.problem
			}
		}
	}
	return ""
}
