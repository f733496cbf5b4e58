package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/quorumlock/quorumlock/redlock"
)

func printStatus(w io.Writer, r *statusReport) error {
	fmt.Fprintf(w, "key %q on %d nodes (quorum %d), settings %q\n\n", r.Key, len(r.Nodes), r.Quorum, r.Settings)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tSTATE\tROLE\tUPTIME\tKEY\tTTL\tFENCE\tVOTING")
	for _, ns := range r.Nodes {
		if !ns.Reachable {
			state := "down"
			if ns.Answered {
				state = "refused"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t-\t-\t-\t-\t-\t%s\n", ns.Node, ns.Addr, state, ns.Admission)
			continue
		}
		key, ttl := "-", "-"
		if ns.HoldsKey {
			key = ns.Value
			switch {
			case ns.TTLMS == -1:
				ttl = "none"
			default:
				ttl = (time.Duration(ns.TTLMS) * time.Millisecond).String()
			}
		}
		fence := "-"
		if ns.Fence > 0 {
			fence = strconv.FormatUint(ns.Fence, 10)
		}
		voting := ns.Admission
		switch {
		case ns.Pending:
			voting += fmt.Sprintf(" (%v left)", time.Duration(ns.QuarantineLeft)*time.Millisecond)
		case ns.HoldOffLeft != nil && *ns.HoldOffLeft >= 0:
			voting += fmt.Sprintf(" (hold-off, %v left)", time.Duration(*ns.HoldOffLeft)*time.Millisecond)
		case ns.HoldOffLeft != nil:
			voting += " (no hold-off yet)"
		}
		fmt.Fprintf(tw, "%d\t%s\tup %.1fms\t%s\t%s\t%s\t%s\t%s\t%s\n", ns.Node, ns.Addr, ns.LatencyMS,
			orDash(ns.Role), time.Duration(ns.UptimeS)*time.Second, key, ttl, fence, voting)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, ns := range r.Nodes {
		if ns.Error != "" {
			fmt.Fprintf(w, "node %d (%s): %s\n", ns.Node, ns.Addr, ns.Error)
		}
	}
	for _, ns := range r.Nodes {
		switch redlock.Admission(ns.Admission) {
		case redlock.AdmissionQuarantined:
			fmt.Fprintf(w, "node %d (%s) lost its data (restart without persistence, failover or flush), or the deployment is new: it does not vote until one max ttl has passed since a client noticed\n", ns.Node, ns.Addr)
		case redlock.AdmissionReconfiguring:
			if left := *ns.HoldOffLeft; left >= 0 {
				fmt.Fprintf(w, "node %d (%s): reconfiguration hold-off, %v left: a change to these settings is under way; the node admits itself when the hold-off ends\n", ns.Node, ns.Addr, time.Duration(left)*time.Millisecond)
			} else {
				fmt.Fprintf(w, "node %d (%s): being reconfigured to these settings, but no hold-off is stamped yet: the reconfiguration has not reached its second step (if quorumlock reconfigure stopped, run it again with the same flags)\n", ns.Node, ns.Addr)
			}
		case redlock.AdmissionUnadmitted:
			fmt.Fprintf(w, "node %d (%s) has no admission marker: the next client attempt starts its quarantine (a new deployment can be admitted at once with \"quorumlock bootstrap\")\n", ns.Node, ns.Addr)
		}
	}
	if r.Holder != "" {
		fmt.Fprintf(w, "holder value: %s\n", r.Holder)
	}
	if r.HolderMetadata != "" {
		fmt.Fprintf(w, "holder: %s\n", printable(r.HolderMetadata))
	}
	if r.MaxFence > 0 {
		fmt.Fprintf(w, "highest fence seen: %d\n", r.MaxFence)
	}
	for _, warn := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	_, err := fmt.Fprintf(w, "verdict: %s\n", r.Summary)
	return err
}

// printable is s as written, or quoted when it holds what a terminal
// would act on (metadata is whatever a holder stored).
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
