// Package redlock implements the Redlock distributed lock over N
// independent Redis primaries (normally five), with optional fencing
// tokens that grow with the order in which holders obtained the lock.
//
// A lock is granted when a majority of nodes (3 of 5) accept SET NX PX in
// one parallel round, and is trusted for ttl - elapsed - drift, where
// elapsed is measured on the monotonic clock from the start of the round to
// the reply that decided it. The client does not wait for slow nodes, and
// never leaves a key behind after a failed attempt: detached from the
// caller's context, it releases on every node that granted or whose
// outcome is unknown (an error, or no reply by the node timeout), and on a
// node still answering when the attempt decided once that reply is in, if
// it is a grant or an error; a refusal took nothing.
//
// A TTL lock cannot stop a holder that pauses past its validity (GC, a
// frozen process, a delayed network write) from acting as the holder
// afterwards. Resources that must stay safe then should check the lease's
// FencingToken (WithFencing), for example with package fencing.
//
// Lock, TryLock and Do take per-call options (CallOption) after their
// arguments: WaitAtMost bounds the wait for the lock (and never fn's run),
// WithCallRetry replaces the Client's retry policy for the call, Fenced
// mints a token for the call alone, and WithMetadata stores who holds the
// lock, for Inspect and the quorumlock status command to show.
//
// Nodes that lose their data (restart without persistence, FLUSHALL) are
// kept from voting until one quarantine (the max ttl plus drift) has
// passed, timed on the node's own clock, so they cannot grant a lock they
// forgot. The deployment's settings (number of nodes, WithMaxTTL,
// WithDriftFactor) are kept on the nodes: a client built with other
// settings is refused (ErrConfigMismatch), so no client's options can
// shorten the quarantine. A brand-new deployment serves one quarantine
// from its first use, or is admitted at once by Client.Bootstrap (the
// quorumlock bootstrap command). A deployment in use changes its settings
// or its nodes with Client.Reconfigure (quorumlock reconfigure), at the
// cost of one quarantine without locks. docs/protocol.md has the proofs. Run the
// nodes with maxmemory-policy noeviction: an evicted lock key is a
// forgotten lock.
//
// Every key quorumlock writes besides the caller's lock key starts with
// the prefix quorumlock: (fences, admission markers, quarantines, tombstones of
// given-up attempts, the line of Lock calls per key, the holder's metadata),
// and keys that start
// with it are refused. Waiters are woken through Pub/Sub: a release that
// names the first Lock call in the key's line (and, WithKeyHandOff, hands
// it the key) tells that call's Client on the channel
// quorumlock:wake:CLIENT, and one that names nobody tells every waiter on
// quorumlock:released:KEY. While a release has handed a key to a Lock
// call, the key holds the call's id. Tools read a key's state through
// Client.Inspect, never the key layout.
//
// go-redis clients only honour context deadlines on the socket when built
// with ContextTimeoutEnabled. With default clients an unresponsive node
// still cannot delay a round (the client returns at quorum or at the
// per-node timeout), but the call to it runs on in the background until
// the client's ReadTimeout; Client.Close waits for such calls. With
// ContextTimeoutEnabled, Close after one node went down waits at most
// about the longer of the probe timeout (counted from New, or from the
// last call to that node that ran out of time) and the node timeout of
// the last call to that node. A call that runs out of time costs go-redis
// its connection, and go-redis would set up the next one inside the next
// call's budget: after such a call the Client sets it up in the
// background instead, with a PING bounded by the probe timeout, so that a
// slow connection setup (TLS on a long link, a busy host) does not keep a
// node out of every round.
//
// Per-node errors (*NodeError) name the node host:port as configured, and a
// call that ran out of time names the node's last transport error (say
// "dial tcp 10.0.0.5:6379: connect: connection refused"): New adds to each
// *redis.Client a dial hook that only records failed dials. go-redis
// itself logs failed dials through its global logger (redis.SetLogger),
// on stderr by default; this package leaves that logger to the
// application.
//
// Client.LockAll, TryLockAll and DoAll take one lease over several keys,
// all or nothing, as a *LeaseSet: the keys are taken in byte order (so two
// callers that list them in other orders cannot deadlock), the keys taken
// first are kept renewed while the call waits for the later ones, and a
// failure releases every key taken before the call returns. The set has a
// *Lease per key, each with its own fencing token, and one Deadline, the
// earliest of theirs; its Done closes when any of them ends, and Extend
// and Release act on every lease.
//
// New takes go-redis v9 clients. NewFromConns takes the nodes of any
// driver as driver.Conns: the modules redlock/driver/rueidisconn and
// redlock/driver/valkeyconn adapt rueidis and valkey-go clients, and
// docs/drivers.md says what a Conn must do and what only go-redis clients
// give (the dial hook above).
//
// A lease is not reentrant, as sync.Mutex is not: a second Lock of a key
// by the Client that holds it waits for that lease like anyone's, and
// TryLock finds the key held. Take the lock at the level that owns the
// work and pass the *Lease down; docs/design.md, "Not reentrant", says why.
//
// A Client is silent unless asked: WithLogger for slog records (each
// acquisition and release at Debug), WithMeterProvider for OpenTelemetry
// metrics (the global provider by default), WithTracerProvider for spans.
// docs/operations.md lists the metric and span names, their units and
// attributes.
//
// # The surface, by task
//
// Build a Client: New (go-redis clients), NewFromConns (any driver),
// Open with a Config (or ConfigFromEnv), each with Options (the With...
// functions; DefaultMaxTTL and the other Default constants are their
// defaults). A Clock and its Timer replace time for tests of your own.
//
// Take a lease: Lock, TryLock, Do, TryDo on one key, LockAll, TryLockAll,
// DoAll on several, each with CallOptions (Fenced, WaitAtMost,
// WithCallRetry, WithMetadata); WithRetry and WithCallRetry take a delay
// function such as DefaultRetry. A *Lease has Key, Deadline, Done,
// FencingToken, Metadata, Value, Extend, KeepRenewed and Release; a
// *LeaseSet has Leases, Deadline, Done, Extend and Release.
//
// Tell why a call failed: ErrNotObtained (a *NotObtainedError with its
// Reason), ErrNotHeld, ErrReleaseUnconfirmed (a *ReleaseError), the
// input errors (ErrInvalidKey, ErrInvalidTTL, ErrMetadataTooLarge, an
// *InputError), the deployment's refusals (ErrConfigMismatch and
// *ConfigError, ErrNodeRefused and *RefusalError, *DuplicateNodeError),
// ErrMaxHold, ErrClosed, per node a *NodeError (ErrNodeHeld and
// ErrNodeQuarantined are such causes); IsHeld and IsUnavailable sort them into "someone holds it" and "the lock
// service cannot grant now".
//
// Operate a deployment: Bootstrap (ErrNotNew, *NotNewError), Reconfigure
// (ErrReconfigureIncomplete), Inspect (a KeyState with its Verdict, of
// NodeStates with their Admission), Check (a CheckReport of NodeChecks with their ServerInfo and
// Problems, by Severity and CheckVerdict), Quarantine (its length for
// given settings), CheckKey and CheckTTL (a tool's input, checked as the
// calls check it), WithQuarantineNotice (QuarantineNotice,
// QuarantinedNode), Close. The limits are MaxMaxTTL and MaxMetadata;
// Check reports a clock further than ClockOffsetBound from the client's.
//
// Leader election on top of leases is in package redlock/election.
package redlock
