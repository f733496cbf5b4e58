package main

// Exit statuses of run besides the command's own. 124 to 127 follow
// timeout(1) and env(1), so scripts that know those read them right.
// They are defined on every platform, though run itself is unix-only:
// check returns exitRunFailed too.
const (
	exitTempFail   = 75  // EX_TEMPFAIL: lock held by someone else throughout --wait
	exitUnavail    = 69  // EX_UNAVAILABLE: the nodes could not grant the lock (no majority answered, quarantine)
	exitLeaseLost  = 124 // the lease ended while the command ran; it was stopped
	exitRunFailed  = 125 // quorumlock itself failed
	exitCannotExec = 126 // the command was found but could not be started
	exitNotFound   = 127 // the command was not found
)
