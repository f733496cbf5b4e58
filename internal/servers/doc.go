// Package servers starts real redis-server and PostgreSQL servers, as child
// processes or as Docker containers, for the tests (through package testenv),
// the chaos suite and the benchmark, and static etcd clusters as child
// processes for the chaos suite's etcd-3 topology.
//
// It returns errors and never imports package testing, so that programs
// built on it (quorumlock-chaos, the benchmark) do not link the test
// framework. Package testenv adds the testing.TB layer: skip or fail, and
// cleanups.
//
// Every server process runs in the foreground as a child of the calling
// process, in its own process group, with a parent-death signal of SIGKILL
// on Linux, so a crashed or killed caller leaves nothing behind. Signals go
// only to the process groups this package started, never to processes found
// by name.
//
// Containers are driven through the docker command-line tool rather than an
// engine client library: the library would bring the Docker client, and
// with it dozens of modules, into the graph of every module that depends on
// this one. They carry labels that let a later process remove the
// containers of one that died before it could clean up.
package servers
