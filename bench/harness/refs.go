package main

import (
	"path/filepath"

	"seckill/bench/benchkit"
)

// startRedis runs a redis-server for the EVALSHA reference with the same
// persistence settings `seckill dev` gives its own (append-only, fsync every
// second).
func startRedis(out string) (*benchkit.Proc, string, error) {
	return benchkit.StartRedis(out, "ref-redis", filepath.Join(out, "ref-redis"))
}
