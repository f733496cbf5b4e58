package suite

import "github.com/redis/go-redis/v9"

// openProbes opens one client per node for INFO readings, apart from the
// clients under test so that the readings are not counted as their
// traffic.
func openProbes(addrs []string) ([]*redis.Client, func()) {
	probes := make([]*redis.Client, len(addrs))
	for i, a := range addrs {
		probes[i] = redis.NewClient(&redis.Options{Addr: a})
	}
	return probes, func() {
		for _, p := range probes {
			_ = p.Close()
		}
	}
}
