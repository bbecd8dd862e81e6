// Package chaos is the fault-injection suite: it runs the
// seckill binary, built with -race, as real separate processes — edge,
// engine sidecar, consumer, and the Kafka-protocol broker (`seckill
// broker`) — on real redis-servers and MariaDB, drives a paced crowd of
// buyers over HTTP on 127.0.0.1, breaks one part on purpose (kill, stop,
// partition), heals it, waits until the system is quiet, and then counts in
// Redis and in the database that every invariant of DESIGN §8 still holds.
// The security tests (admin authentication, qualification tokens, hostile
// HTTP clients) run against the same processes.
//
// The fleet (fleet_test.go, `make fleet`) is the production shape: a Redis
// Cluster of 3 masters + 3 replicas (cluster.go) for the default
// Redis, two hot shards, three edges (one with a sidecar engine) and three
// consumers of one group, while members come and go and a cluster master
// fails over. The failover tests (failover_test.go) make a master die with
// writes its replica never got, on a real master and replica, and check
// what DESIGN "What a Redis failover can lose" says becomes of them.
//
// It is a black box: it imports only internal/testenv and
// internal/faultproxy (the proxy that makes a dependency slow, refused or
// partitioned) from the project. It
// reads Redis keys and SQL rows by their documented names (names.go),
// writes the configuration file, the activity and the tokens it needs from
// the documentation, and counts the ledger itself; the admin stock report and
// the reconciler are asked too, as second opinions that must agree.
//
// What the checker (check.go, judged by a pure function that
// checker_test.go feeds hand-built broken states) demands of every scenario:
//   - per SKU: orders + live occupancies + Redis stock == initial, Redis
//     stock + sold == initial, the snapshot agrees, one live order per user,
//     no stock held without an order;
//   - every ticket answered 200 QUEUING (the broker acknowledged its
//     message) ends SUCCESS with a live order of its buyer; it may end FAIL
//     only when the scenario declares a Redis data loss of its SKU, it was
//     answered before the emptied Redis came back, and its request-log story
//     says the loss failed it;
//   - in queue mode (queue_test.go): every attempt in the attempts topic,
//     which the checker reads, and every ticket answered 202 WAITING ends
//     SUCCESS naming its own order or FAIL with the ledger's reason (not
//     BUSY, not RATE_LIMITED); none ends FAIL holding its own order or
//     occupancy (served twice); a 409 WAITING names a ticket of that buyer
//     and SKU, who holds at most one order;
//   - once idle: no result key QUEUING or WAITING, no request-log row in a
//     state that does not end a story;
//   - the reconciler answers 200 with zero drift and counts what the checker
//     counts; the admin stock report agrees;
//   - the crowd got only the answers the fault allows: healthy ones before
//     it, the fault's named set while it lasted (until its settle time after
//     the heal), healthy ones after; and tickets were accepted after it;
//   - no process reported a data race.
//
// The harness (harness.go, proc.go, load.go, cluster.go) and the checker
// (books.go, check.go, ledger.go, names.go) are non-test files, so other
// rigs can use them: CheckBooks judges the books a finished sale left in
// Redis and the store by the same verdicts (bench/soak checks its run with
// it). They take testing.TB where they take a test. The scenarios are the
// _test.go files.
//
// Every scenario runs in every `go test ./...` — `make test` runs the suite
// alone after the other packages, and CI runs `make test`. `make chaos` is
// the same run, verbose, with one line per scenario: each test appends its
// line to the file named by $SECKILL_CHAOS_TABLE.
package chaos
