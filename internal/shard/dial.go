package shard

import (
	"math/rand/v2"
	"net"
	"time"

	"github.com/redis/rueidis"
)

func netDialer(timeout time.Duration) net.Dialer {
	return net.Dialer{Timeout: timeout, KeepAlive: time.Minute}
}

// readRetries bounds the attempts rueidis makes of a read-only command
// that fails on the connection (writes, the scripts included, are never
// retried). rueidis' own policy retries until the context ends: a read
// without a deadline waits as long as the shard is down, and one under a
// long deadline waits all of it, so one dead shard would hold a
// reconciler pass, and every SKU behind it, for the pass's whole bound.
// With retryDelay's backoff 24 attempts span about 5–6 s (the delays
// double from 2 µs and stop growing at 1 s), enough to ride through a
// restart or a failover's switch; a read under a shorter deadline still
// ends with its deadline.
const readRetries = 24

// retryDelay is rueidis' default backoff (equal jitter, 2^n µs, at most
// 1 s) that gives up after readRetries attempts.
func retryDelay(attempts int, _ rueidis.Completed, _ error) time.Duration {
	if attempts >= readRetries {
		return -1
	}
	base := 1 << min(20, attempts)
	return min(time.Second, time.Duration(base+rand.IntN(base))*time.Microsecond)
}
