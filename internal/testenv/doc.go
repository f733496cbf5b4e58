// Package testenv starts real redis-server and PostgreSQL processes for the
// integration tests and the chaos suite.
//
// It has two layers. The plain layer (StartRedisProcess, StartPostgresProcess)
// returns errors and works outside tests, so the chaos runner can drive the
// same processes. The test layer (Redis, RedisNodes, Postgres, Key) takes a
// testing.TB, fails or skips the test itself and registers cleanups.
//
// Every server runs in the foreground as a child of the calling process, in
// its own process group, with a parent-death signal of SIGKILL on Linux, so a
// crashed or killed test binary leaves nothing behind. Signals go only to the
// process groups this package started, never to processes found by name.
//
// A missing backend binary makes a test helper skip the test, except when
// CI=true or QUORUMLOCK_REQUIRE_BACKENDS=1, where it fails the test instead:
// CI must never pass by skipping.
//
// One PostgreSQL server is shared by all tests of a test binary, because
// initdb takes seconds. It starts on first use; the package's TestMain must
// call Shutdown after m.Run to stop it and remove its data directory:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		if err := testenv.Shutdown(); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			code = 1
//		}
//		os.Exit(code)
//	}
//
// Without that call the server still dies with the test binary (parent-death
// signal), but its temporary directory is left behind. Call Shutdown before any
// goleak check: the server's reaper goroutine is alive until then.
package testenv
