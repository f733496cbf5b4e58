// Package testenv gives integration tests real redis-server and PostgreSQL
// servers: Redis, RedisNodes, Postgres and Key take a testing.TB, fail or
// skip the test themselves and register cleanups.
//
// The servers come from package servers, which returns errors and does not
// import package testing, so that the chaos suite and the CLI can drive the
// same processes without linking the test framework. With
// QUORUMLOCK_TEST_BACKEND=docker the helpers start containers instead of
// processes (see BackendEnv).
//
// A missing backend binary makes a test helper skip the test, except when
// CI=true or QUORUMLOCK_REQUIRE_BACKENDS=1, where it fails the test instead:
// CI must never pass by skipping.
//
// One PostgreSQL server is shared by all tests of a test binary, because
// initdb takes seconds. It starts on first use; the package's TestMain must
// call Shutdown after m.Run to stop it and remove its data directory;
// Finish does that and then the goleak check:
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Finish(m.Run())) }
//
// Without that call the server still dies with the test binary (parent-death
// signal), but its temporary directory is left behind. Call Shutdown before any
// goleak check: the server's reaper goroutine is alive until then.
package testenv
