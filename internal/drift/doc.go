// Package drift implements the validity arithmetic of the Redlock algorithm
// (the clock a Client reads is redlock.Clock).
//
// A lease obtained at t0 with a time-to-live ttl is trusted until
//
//	t0 + ttl - elapsed - drift,  drift = ttl*factor + 2ms
//
// where elapsed is the time the acquisition round took on the client's
// monotonic clock. The 2 ms cover Redis' 1 ms expiry resolution plus 1 ms of
// minimum drift for small TTLs, as in the reference client; factor bounds the
// relative rate error between the client's clock and the Redis servers'.
//
// Everything here is pure arithmetic: no I/O, safe for concurrent use.
package drift
