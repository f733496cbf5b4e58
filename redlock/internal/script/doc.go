// Package script is the node side of redlock's protocol: the only Go code
// that knows the Redis keys and channels quorumlock uses on a node, the
// Lua scripts it runs there, their positional KEYS and ARGV, their status
// codes, and the grammar of waiter ids and release notices that the
// scripts read and write.
//
// Each script is a .lua file beside a Go file that gives its call a typed
// argument struct and its answer a typed reply. The scripts' contracts are
// their header comments and this package's tests, which run them on
// redis-server; the safety arguments that rest on them are in
// docs/protocol.md.
package script
