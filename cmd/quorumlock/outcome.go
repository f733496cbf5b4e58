//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// outcome turns the run into the exit status, with a message for every
// status that is not the command's own.
func (s *session) outcome(derr error) int {
	rc := s.rc
	switch {
	case !s.started:
		cause := context.Cause(s.lockCtx)
		var se signalError
		if errors.As(cause, &se) {
			fmt.Fprintf(s.stderr, "quorumlock run: %s while waiting for the lock on %q; the command was not run\n", signalName(se.sig), rc.key)
			return 128 + int(se.sig)
		}
		if errors.Is(derr, redlock.ErrConfigMismatch) || errors.Is(derr, redlock.ErrNodeRefused) && !errors.Is(derr, redlock.ErrNotObtained) {
			// Configuration, not contention: trying later does not help.
			fmt.Fprintf(s.stderr, "quorumlock run: %s; the command was not run\n", redact(fmt.Sprint(derr)))
			return exitRunFailed
		}
		if errors.Is(derr, redlock.ErrNotObtained) {
			how := "within --wait " + rc.wait.d.String()
			if rc.wait.set && rc.wait.d == 0 {
				how = "in one attempt (--wait 0)"
			}
			if redlock.IsUnavailable(derr) {
				fmt.Fprintf(s.stderr, "quorumlock run: lock %q not obtained %s: the lock service is unavailable: %s; the command was not run\n", rc.key, how, redact(describeNotObtained(derr)))
				return exitUnavail
			}
			fmt.Fprintf(s.stderr, "quorumlock run: lock %q not obtained %s: %s; the command was not run\n", rc.key, how, redact(describeNotObtained(derr)))
			return exitTempFail
		}
		fmt.Fprintf(s.stderr, "quorumlock run: %s\n", redact(fmt.Sprint(derr)))
		return exitRunFailed
	case s.execErr != nil:
		fmt.Fprintf(s.stderr, "quorumlock run: cannot start %s: %s\n", redact(rc.command[0]), redact(s.execErr.Error()))
		if errors.Is(s.execErr, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotExec
	case s.lost != nil:
		if !s.terminated {
			fmt.Fprintf(s.stderr, "quorumlock run: the lease on %q ended about when the command exited (status %d); it may have run without the lock at the end\n", rc.key, s.status)
		} else {
			fmt.Fprintf(s.stderr, "quorumlock run: the command was stopped because the lease on %q was lost; its exit status was %d\n", rc.key, s.status)
		}
		return exitLeaseLost
	}
	return s.status
}

// describeNotObtained summarises the per-node causes of the last attempt.
func describeNotObtained(err error) string {
	var ne *redlock.NotObtainedError
	if !errors.As(err, &ne) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return "the wait ended before an attempt completed"
		}
		return fmt.Sprint(err)
	}
	// An attempt stops once it is decided: the nodes not heard from by
	// then may be in the same state as those counted.
	atLeast := ""
	if ne.Replied < ne.Nodes {
		atLeast = "at least "
	}
	var held, quarantined, silent, failed int
	var firstFailure, firstSilent string
	for _, n := range ne.NodeErrors() {
		switch {
		case errors.Is(n.Err, redlock.ErrNodeHeld):
			held++
		case errors.Is(n.Err, redlock.ErrNodeQuarantined):
			quarantined++
		case errors.Is(n.Err, context.DeadlineExceeded) || errors.Is(n.Err, context.Canceled):
			// Slow, or not waited for once the attempt could no longer
			// succeed: the library labels both the same way.
			silent++
			if firstSilent == "" {
				firstSilent = n.Error()
			}
		default:
			failed++
			if firstFailure == "" {
				firstFailure = n.Error()
			}
		}
	}
	var parts []string
	if ne.Reason == redlock.ReasonNoQuorum && held+quarantined+silent+failed > 0 {
		// The library's account names the unreachable nodes and why.
		parts = append(parts, ne.Detail)
		if firstFailure == "" {
			firstFailure = firstSilent
		}
		if firstFailure != "" {
			parts = append(parts, "first: "+firstFailure)
		}
		return strings.Join(parts, "; ")
	}
	if held > 0 {
		parts = append(parts, fmt.Sprintf("held by another owner on %s%d of %d nodes", atLeast, held, ne.Nodes))
	}
	if quarantined > 0 {
		parts = append(parts, fmt.Sprintf("%s%d of %d nodes in restart quarantine", atLeast, quarantined, ne.Nodes))
	}
	if silent > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) did not answer in time (first: %s)", silent, firstSilent))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d node(s) failed or did not answer (first: %s)", failed, firstFailure))
	}
	if quarantined > 0 {
		// Not "run quorumlock bootstrap": the attempt itself started the
		// quarantines, and bootstrap never ends one.
		when := "when their quarantine ends"
		if ne.Wait > 0 {
			when = fmt.Sprintf("when the first quarantine ends, in about %v", ne.Wait.Round(time.Millisecond))
		}
		parts = append(parts, fmt.Sprintf("the nodes admit themselves %s (quorumlock status shows them; quorumlock bootstrap admits only a deployment nobody has used yet)", when))
	}
	if len(parts) == 0 {
		if ne.Reason == redlock.ReasonCancelled {
			return "the wait ended before an attempt completed"
		}
		return ne.Detail
	}
	return strings.Join(parts, "; ")
}
