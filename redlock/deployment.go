package redlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/quorumlock/quorumlock/internal/drift"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The settings a deployment's safety rests on are kept on its nodes, not in
// each client. A node's admission marker holds them as one string, and a
// node grants a lock only to a client whose settings are that string
// exactly (acquire.lua compares them), so a client built with another max
// ttl, drift factor or number of nodes gets ErrConfigMismatch instead of a
// lock, and the quarantine a restarted node serves is the deployment's,
// whichever client ends it. See docs/protocol.md, "The restart quarantine".

// settingsVersion names the layout of the settings string and of the
// admission keys; nodes written by a different layout never match.
const settingsVersion = "v1"

// MaxMaxTTL is the largest max ttl a Client accepts (WithMaxTTL): a node
// that lost its data is out of every quorum for one max ttl, so a larger
// value would keep it out for more than a day; hold long work with Do,
// which renews a shorter lease.
const MaxMaxTTL = script.MaxMaxTTL

// settings are a deployment's safety parameters as kept on its nodes.
type settings struct {
	nodes  int
	maxTTL time.Duration
	factor float64
}

// deployment is the settings a Client runs with, and the two strings its
// scripts compare with a node's marker, made once in New.
type deployment struct {
	settings
	marker string // settings.String(): what the nodes keep
	// acquire is what the acquire and extend scripts compare with the
	// node's marker: marker, or "" without the restart quarantine (the
	// scripts then skip the admission check).
	acquire string
}

func newDeployment(s settings, quarantine bool) deployment {
	d := deployment{settings: s, marker: s.String()}
	if quarantine {
		d.acquire = d.marker
	}
	return d
}

// String is the canonical form stored on the nodes and compared by the
// scripts: equal settings give equal strings in every client.
func (s settings) String() string {
	return fmt.Sprintf("%s nodes=%d maxttl=%dms drift=%s", settingsVersion, s.nodes, s.maxTTL.Milliseconds(),
		strconv.FormatFloat(s.factor, 'g', -1, 64))
}

// parseSettings reads settings written by String; false for anything
// else (another layout, a reconfiguration's marker, "").
func parseSettings(s string) (settings, bool) {
	var out settings
	var ms int64
	var factor string
	n, err := fmt.Sscanf(s, settingsVersion+" nodes=%d maxttl=%dms drift=%s", &out.nodes, &ms, &factor)
	if err != nil || n != 3 {
		return settings{}, false
	}
	f, err := strconv.ParseFloat(factor, 64)
	if err != nil {
		return settings{}, false
	}
	out.maxTTL, out.factor = time.Duration(ms)*time.Millisecond, f
	if out.String() != s || out.nodes < 1 || checkMaxTTL(out.maxTTL, f) != nil || drift.CheckFactor(f) != nil {
		return settings{}, false
	}
	return out, true
}

// quarantine is how long a node that lost its data stays out of every
// quorum (script.QuarantineOf, which the model checker shares).
func (s settings) quarantine() time.Duration {
	return script.QuarantineOf(s.maxTTL, s.factor)
}

// fenceKeep is how long a node keeps a key's fence after a commit for a
// lease of ttl: past the lease's own key by one quarantine, so that a fence
// is read directly whenever the key was released or expired normally, and
// a fence that did expire was committed at least one quarantine before it
// is missed, which the time floor covers while node clocks differ by less
// than that (docs/protocol.md, "Fences expire").
func (s settings) fenceKeep(ttl time.Duration) time.Duration {
	return ttl + s.quarantine()
}

// bootstrapWindow bounds Bootstrap: its claims must all be written within
// it on the client's clock, and a node admits on a claim no older than it
// on the node's clock. Two windows, each measured with a rate error of at
// most the drift factor, end before any claim is a quarantine old, so
// every node Bootstrap admits is admitted before the ordinary admission
// could admit any node on Bootstrap's claims (docs/protocol.md,
// "Bootstrap"). About 0.45 Q.
func (s settings) bootstrapWindow() time.Duration {
	q := float64(s.quarantine())
	return time.Duration(0.9 * q * (1 - s.factor) / (2 * (1 + s.factor)))
}

// pendingTTL is how long a pending mark lives: long enough for any client
// to finish the quarantine it times, short enough that a mark nobody
// followed up (or one a misconfigured client left behind) goes away.
func (s settings) pendingTTL() time.Duration {
	return markTTL(s.quarantine())
}

// markTTL is how long a pending mark that times q lives: a quarantine's
// (pendingTTL) or a reconfiguration's hold-off (reconfig.step).
func markTTL(q time.Duration) time.Duration {
	return 2*q + time.Second
}

// checkMaxTTL validates a max ttl together with the drift factor
// (script.CheckMaxTTL).
func checkMaxTTL(d time.Duration, factor float64) error { return script.CheckMaxTTL(d, factor) }

// Quarantine returns how long a node that lost its data is kept out of
// every quorum for a deployment whose clients use maxTTL and drift factor
// factor: maxTTL + maxTTL*factor + 2ms. Tools that wait out a quarantine
// (the chaos suite, operators' scripts) ask for it here rather than
// recomputing the rule. It returns an error for settings New would refuse.
func Quarantine(maxTTL time.Duration, factor float64) (time.Duration, error) {
	q, err := script.CheckedQuarantine(maxTTL, factor)
	if err != nil {
		return 0, fmt.Errorf("redlock: Quarantine: %w", err)
	}
	return q, nil
}
