package main

import (
	"strings"
	"testing"
	"time"
)

func TestPerCoreIsEventsPerCPUSecond(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		cpu  time.Duration
		want float64
	}{
		{1000, time.Second, 1000},
		{1000, 250 * time.Millisecond, 4000},
		{5, 0, 0}, // no CPU measured: no figure, not infinity
	} {
		if got := perCore(tc.n, tc.cpu); got != tc.want {
			t.Errorf("perCore(%d, %v) = %v, want %v", tc.n, tc.cpu, got, tc.want)
		}
	}
}

func TestNotBoundFlagsAnUnsaturatedRun(t *testing.T) {
	if s := notBound(900*time.Millisecond, time.Second); s != "" {
		t.Errorf("0.9 cores flagged: %q", s)
	}
	if s := notBound(300*time.Millisecond, time.Second); !strings.Contains(s, "NOT CPU-bound") {
		t.Errorf("0.3 cores not flagged: %q", s)
	}
}

func TestRenderPrintsEachFigureWithItsCommand(t *testing.T) {
	out := render(options{dur: time.Second}, []figure{
		{part: "edge", what: "reject/s", ceiling: 123456.7, seen: 120000, note: "n", cmd: "wrk -t1 against seckill edge"},
		{part: "redis shard", what: "buyers/s", ceiling: 0.5, seen: 2.25, cmd: "go run ./bench/scaling -only redis"},
	})
	for _, want := range []string{"| edge | reject/s | 123457 | 120000 | n |", "| redis shard | buyers/s | 0.5 | 2.2 |",
		"- edge, reject/s: `wrk -t1 against seckill edge`", "- redis shard, buyers/s: `go run ./bench/scaling -only redis`"} {
		if !strings.Contains(out, want) {
			t.Errorf("render lacks %q:\n%s", want, out)
		}
	}
}
