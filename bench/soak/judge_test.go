package main

import (
	"strings"
	"testing"
	"time"
)

// series makes one sample a second of a Go process and a redis-server
// whose RSS are goRSS(t) and redisRSS(t) megabytes.
func series(n int, goRSS, redisRSS func(t int) int64) []sample {
	var ss []sample
	for t := 1; t <= n; t++ {
		ss = append(ss, sample{at: time.Duration(t) * time.Second, rss: []int64{goRSS(t) * 1e6, redisRSS(t) * 1e6},
			fds: []int{10, 10}, thr: []int{5, 5}, redis: []redisMem{{}, {used: int64(t) * 1e6}}, sizes: map[string]float64{}})
	}
	return ss
}

// TestJudgeFailsOnGrowthAndJumps: the soak's two rules, on made-up
// samples of a 100-second run judged from 20 s: a Go process flat after
// its warm-up passes (whatever it did before), one that grows more than
// 10% after it fails, one that jumps past twice its median fails, and a
// redis-server that grows with its records is reported, not failed.
func TestJudgeFailsOnGrowthAndJumps(t *testing.T) {
	procs := []proc{{name: "seckill", pid: 1}, {name: "redis-hot", pid: 2, redis: "127.0.0.1:1"}}
	c := config{dur: 100 * time.Second, warmup: 20 * time.Second}
	growingRedis := func(t int) int64 { return int64(10 + t) }
	cases := []struct {
		name  string
		goRSS func(t int) int64
		fail  string // "" passes
	}{
		{"warm-up then flat", func(t int) int64 { return min(int64(100+10*t), 250) }, ""},
		{"slow growth after the warm-up", func(t int) int64 { return int64(200 + t) }, "grew"},
		{"one jump", func(t int) int64 {
			if t == 70 {
				return 500
			}
			return 200
		}, "jumped"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := judge(procs, series(100, tc.goRSS, growingRedis), c)
			switch {
			case tc.fail == "" && err != nil:
				t.Fatalf("failed: %v\n%s", err, rep)
			case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
				t.Fatalf("error %v, want one saying %q\n%s", err, tc.fail, rep)
			}
			if !strings.Contains(rep, "redis-hot used_memory") {
				t.Errorf("no line on redis-hot's memory:\n%s", rep)
			}
		})
	}
	if _, err := judge(procs, series(5, func(int) int64 { return 100 }, growingRedis), c); err == nil {
		t.Error("a run with no sample after its warm-up passed")
	}
}
