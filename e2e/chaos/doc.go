// Package chaos is the fault-injection suite (issue 5): it runs the built
// seckill binary as real separate processes — edge, engine sidecar,
// consumer, and the Kafka-protocol broker (`seckill broker`) — on real
// redis-servers and MariaDB, drives thousands of concurrent buyers over HTTP
// on 127.0.0.1, breaks one part on purpose (kill, stop, partition), heals
// it, waits until the system is quiet, and then counts in Redis and in the
// database that every invariant of DESIGN §8 still holds. The security tests
// (admin authentication, qualification tokens, hostile HTTP clients) run
// against the same processes.
//
// Everything lives in the _test.go files: the harness (harness_test.go,
// proc_test.go, dbproxy_test.go), the buyers (load_test.go), the invariant
// checker (check_test.go), the scenarios (scenarios_test.go, hotshard_test.go) and the
// security tests (security_test.go).
//
// The fast scenarios run in every `go test ./...`; the long ones need
// SECKILL_CHAOS=1, which `make chaos` sets. `make chaos` prints one line per
// scenario (requests sent, accepted, orders, stock left, invariants); each
// test appends its line to the file named by $SECKILL_CHAOS_TABLE.
package chaos
