package quorum

// Majority returns the smallest number of nodes out of n that any two
// such sets must share a member: floor(n/2)+1. It returns 0 for n <= 0.
func Majority(n int) int {
	if n <= 0 {
		return 0
	}
	return n/2 + 1
}

// Decided reports whether a round over n nodes that needs need successes is
// decided after ok successes and failed failures: either ok >= need, or the
// nodes that have not failed can no longer make up need.
func Decided(n, need, ok, failed int) bool {
	return ok >= need || n-failed < need
}
