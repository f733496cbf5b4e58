//go:build unix

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock"
)

// quarantineNotice is the line run prints when the nodes are in their
// restart quarantine: once, as soon as the first attempt finds it.
func (rc *runConfig) quarantineNotice(n redlock.QuarantineNotice) string {
	left := "about " + n.Left.Round(time.Second).String()
	if n.Left <= 0 {
		left = "up to one quarantine"
		if q, err := redlock.Quarantine(rc.maxTTL.d, redlock.DefaultDriftFactor); err == nil {
			left = "up to " + q.Round(time.Second).String()
		}
	} else if n.Left < time.Second {
		left = "about " + n.Left.Round(time.Millisecond).String()
	}
	if n.Reconfiguring() {
		msg := "quorumlock run: reconfiguration hold-off, " + strings.TrimPrefix(left, "about ") + " left: a change to these settings is under way and locks are refused until it ends; waiting"
		if n.Left <= 0 {
			msg = "quorumlock run: reconfiguration hold-off: a change to these settings is under way and locks are refused until it ends (" + left + "); waiting"
		}
		return msg + rc.waitNote(n) + " (the nodes admit themselves when it ends)"
	}
	msg := fmt.Sprintf("quorumlock run: the nodes are new or lost their data: locks are refused for %s while they serve their restart quarantine; waiting", left)
	return msg + rc.waitNote(n) + " (the nodes admit themselves when it ends; quorumlock bootstrap admits only a deployment nobody has used yet)"
}

// unavailableNotice is the line run prints, once, when it starts to wait
// because the lock service cannot grant the lock (fewer than a majority of
// nodes answer): not a holder, so cron may want to alert rather than skip.
func (rc *runConfig) unavailableNotice(err error) string {
	what := err.Error()
	var e *redlock.NotObtainedError
	if errors.As(err, &e) {
		what = e.Detail
	}
	until := "until a majority of nodes answers"
	if rc.wait.set {
		until += fmt.Sprintf(" or --wait %v ends (then exit %d)", rc.wait.d, exitUnavail)
	}
	return "quorumlock run: the lock service cannot grant the lock now (" + what + "); waiting " + until
}

// waitNote says when --wait will end the wait before the nodes do.
func (rc *runConfig) waitNote(n redlock.QuarantineNotice) string {
	if rc.wait.set && n.Left > rc.wait.d {
		return fmt.Sprintf(" (longer than --wait %v, which will end first)", rc.wait.d)
	}
	return ""
}
