package chaos

import "testing"

// A server that could not bind a port says so in its log in one of a few
// ways; a start that failed so is tried again on new ports, and one that
// failed for another reason is not.
func TestZooKeeperPortTakenIsRecognised(t *testing.T) {
	for _, tc := range []struct {
		log  string
		want bool
	}{
		// From a CI run: the election listener gave up on its port.
		{"3 errors. Use zookeeper.electionPortBindRetry property to increase retry count. | Exiting JVM with code 14", true},
		{"java.net.BindException: Address already in use", true},
		{"Address already in use (Bind failed)", true},
		{"Unable to load database on disk | Exiting JVM with code 1", false},
		{"", false},
	} {
		if got := portTaken(tc.log); got != tc.want {
			t.Errorf("portTaken(%q) = %v, want %v", tc.log, got, tc.want)
		}
	}
}
