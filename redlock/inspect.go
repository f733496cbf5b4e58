package redlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/internal/quorum"
	"github.com/quorumlock/quorumlock/redlock/driver"
	"github.com/quorumlock/quorumlock/redlock/internal/script"
)

// The operator's reads of a deployment, which write nothing: Inspect, of
// one key (what it reports is keystate.go), and Check, of what the
// deployment's safety and availability depend on (check.go).

// Inspect reads, in parallel and without changing anything, what every
// node knows about key: whether it holds it and for how long, its fence,
// whether the node may vote, the holder's metadata (WithMetadata), and the
// server's version, role and uptime;
// then judges whether the key is held by a majority. Nodes that do not
// answer before ctx ends are reported (NodeState.Err), not an error. It
// fails for a bad key (an *InputError, ErrInvalidKey), a closed Client, and
// a ctx that had already ended when it was called (the error wraps ctx's
// error; nothing is sent). Safe for concurrent use.
func (c *Client) Inspect(ctx context.Context, key string) (*KeyState, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: Inspect of %s not sent: %w", keyText(key), err)
	}
	n := len(c.nodes)
	ks := &KeyState{Key: key, Settings: c.dep.marker, Quorum: c.quorum, Nodes: make([]NodeState, n)}
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (NodeState, error) {
		return c.inspectNode(ctx, i, key), nil
	})
	for _, rep := range r.Await(ctx, n, func(quorum.Reply[NodeState]) bool { return true }) {
		ks.Nodes[rep.Node] = rep.Val
	}
	r.Cancel()
	c.spawn(func() { r.Wait() })
	for i := range ks.Nodes {
		if ks.Nodes[i].Admission == "" { // no reply before ctx ended
			ks.Nodes[i] = NodeState{Node: i, Addr: c.nodes[i].name, Admission: AdmissionUnknown, Err: c.cause(i, cmp.Or(ctx.Err(), context.DeadlineExceeded))}
		}
	}
	ks.judge()
	return ks, nil
}

func (c *Client) inspectNode(ctx context.Context, i int, key string) NodeState {
	nd := c.nodes[i]
	ns := NodeState{Node: i, Addr: nd.name, Admission: AdmissionUnknown}
	start := time.Now()
	cmds := []driver.Cmd{{Args: script.StateArgs(key)}, {Args: []any{"info", "server"}}, {Args: []any{"info", "replication"}}}
	nd.conn.Pipeline(ctx, cmds)
	state, info, role := cmds[0], cmds[1], cmds[2]
	if s, ierr := replyText(info.Val, info.Err); ierr == nil {
		ns.Server.Version = infoField(s, "redis_version")
		ns.Server.RunID = infoField(s, "run_id")
		up, _ := strconv.ParseInt(infoField(s, "uptime_in_seconds"), 10, 64)
		ns.Server.Uptime = time.Duration(up) * time.Second
	}
	if s, rerr := replyText(role.Val, role.Err); rerr == nil {
		ns.Server.Role = infoField(s, "role")
	}
	ns.Latency = time.Since(start)
	st, err := script.StateOf(state.Val, state.Err)
	if err != nil {
		ns.Err = c.cause(i, err) // typed (ErrNodeRefused), with the last transport error
		return ns
	}
	switch {
	case st.Marker == c.dep.marker:
		ns.Admission, ns.Settings = AdmissionAdmitted, st.Marker
	case c.movingHere(st.Marker):
		ns.Admission, ns.Settings, ns.ReconfiguringTo = AdmissionReconfiguring, c.dep.marker, c.dep.marker
		ns.QuarantineLeft = -1
		if st.Pending == c.dep.marker && st.Quarantine.Length > 0 {
			ns.QuarantineLeft = max(st.Quarantine.Left(), 0)
		}
	case st.Marker != "":
		ns.Admission, ns.Settings = AdmissionMismatch, st.Marker
		if to, ok := script.MovingTo(st.Marker); ok {
			ns.ReconfiguringTo = to
		} else if to, ok := script.RetiredTo(st.Marker); ok {
			ns.ReconfiguringTo, ns.Retired = to, true
		}
	case st.Pending != "" && st.Pending != c.dep.marker:
		ns.Admission, ns.Settings = AdmissionMismatch, st.Pending
	case st.Pending != "":
		ns.Admission, ns.Settings = AdmissionQuarantined, st.Pending
		ns.QuarantineLeft = st.Quarantine.Left()
	default:
		ns.Admission = AdmissionUnadmitted
	}
	if st.Value != "" && st.PTTL != -2 {
		ns.Value = st.Value
		ns.TTL = time.Duration(st.PTTL) * time.Millisecond
		if st.PTTL == -1 {
			ns.TTL = -1
		}
	}
	ns.Metadata = st.Meta
	if st.Fence != "" {
		f, perr := strconv.ParseUint(st.Fence, 10, 64)
		if perr != nil {
			ns.Err = fmt.Errorf("fence value %q is not a number", st.Fence)
		}
		ns.Fence = f
	}
	return ns
}

// Check reads, in parallel and without writing anything, what the
// deployment's safety and availability depend on, on every node: whether
// it answers and how fast, its version and role, its replicas, its
// eviction policy and persistence (RDB snapshots, AOF and its fsync
// policy), its clock against this process's, whether it votes for this
// client's settings (or serves a quarantine, and how long is left), and,
// on Redis 7 or later, whether this client's ACL user may run every
// command the library's scripts run, on the library's keys and on keys
// (sample lock keys; none: only the library's own). It returns an error
// only for a closed Client, a bad key, or a ctx that had already ended;
// what it finds is in the report. Safe for concurrent use.
func (c *Client) Check(ctx context.Context, keys ...string) (*CheckReport, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	for _, k := range keys {
		if err := checkKey(k); err != nil {
			return nil, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redlock: Check not sent: %w", err)
	}
	n := len(c.nodes)
	rep := &CheckReport{Settings: c.dep.marker, Quorum: c.quorum, Nodes: make([]NodeCheck, n)}
	done := make([]bool, n)
	r := quorum.Start(nil, ctx, n, func(ctx context.Context, i int) (NodeCheck, error) {
		nc := c.checkNode(ctx, i, keys)
		nc.judge(c)
		return nc, nil
	})
	for _, rp := range r.Await(ctx, n, func(quorum.Reply[NodeCheck]) bool { return true }) {
		rep.Nodes[rp.Node], done[rp.Node] = rp.Val, true
	}
	r.Cancel()
	c.spawn(func() { r.Wait() })
	for i := range rep.Nodes {
		if !done[i] {
			nc := NodeCheck{Node: i, Addr: c.nodes[i].name, Admission: AdmissionUnknown, Err: c.cause(i, cmp.Or(ctx.Err(), context.DeadlineExceeded))}
			nc.judge(c)
			rep.Nodes[i] = nc
		}
	}
	rep.judge()
	return rep, nil
}

// checkNode reads node i for Check; judge lists what it found wrong.
func (c *Client) checkNode(ctx context.Context, i int, keys []string) NodeCheck {
	nd := c.nodes[i]
	nc := NodeCheck{Node: i, Addr: nd.name, Identity: c.ident.proven()[i]}

	// The clock first, alone, so that the round trip bounds the error.
	t0 := time.Now()
	tm, err := replyTime(nd.conn.Do(ctx, "time"))
	nc.RTT = time.Since(t0)
	switch {
	case err == nil:
		nc.ClockOffset, nc.ClockRead = tm.Sub(t0.Add(nc.RTT/2)), true
	case refusal(err) == nil:
		nc.Err, nc.Admission = c.cause(i, err), AdmissionUnknown
		return nc
	}

	acl := append([]any{"eval", aclScript, 0}, aclArgs(keys)...)
	cmds := []driver.Cmd{{Args: []any{"info"}}, {Args: []any{"config", "get", "save"}}, {Args: []any{"config", "get", "appendfsync"}}, {Args: acl}}
	nd.conn.Pipeline(ctx, cmds)
	info, save, fsync, aclr := cmds[0], cmds[1], cmds[2], cmds[3]
	if s, err := replyText(info.Val, info.Err); err == nil {
		// The server's version, role and uptime come with the Inspect
		// read below.
		nc.Replicas, _ = strconv.Atoi(infoField(s, "connected_slaves"))
		nc.Eviction = infoField(s, "maxmemory_policy")
		nc.AppendOnly = infoField(s, "aof_enabled") == "1"
	}
	sv, serr := configValue(save.Val, save.Err, "save")
	fv, ferr := configValue(fsync.Val, fsync.Err, "appendfsync")
	if serr == nil && ferr == nil {
		nc.ConfigRead, nc.Save, nc.AppendFsync = true, strings.TrimSpace(sv), fv
	}
	if res, err := aclr.Val, aclr.Err; err == nil {
		oks, ok := res.([]any)
		if !ok {
			nc.aclErr = errors.New("the node runs Redis before 7, which cannot tell")
		}
		if ok {
			nc.ACLChecked = true
			checks := aclChecks(keys)
			for j, v := range oks {
				if j < len(checks) && v != int64(1) {
					nc.deny(checks[j])
				}
			}
		}
	} else {
		// EVAL itself refused is this: the Inspect read below, a script
		// too, then reports the node as refusing this client.
		nc.aclErr = err
	}

	ns := c.inspectNode(ctx, i, checkProbeKey)
	nc.Server = ns.Server
	nc.Admission, nc.Settings, nc.ReconfiguringTo, nc.QuarantineLeft = ns.Admission, ns.Settings, ns.ReconfiguringTo, ns.QuarantineLeft
	if ns.Err != nil {
		nc.Err = ns.Err
		nc.Admission = AdmissionUnknown
	}
	return nc
}
