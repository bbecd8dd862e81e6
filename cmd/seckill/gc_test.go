package main

import (
	"os"
	"runtime/debug"
	"testing"

	"go.uber.org/zap"

	"seckill/cmd/seckill/config"
)

// gcNow reads the collector's percent and memory limit without changing
// them.
func gcNow() (int, int64) {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p, debug.SetMemoryLimit(-1)
}

// TestApplyGCSetsTheCollectorUnlessTheEnvironmentDid: the gc keys set the
// percent and the memory limit; GOGC and GOMEMLIMIT in the environment
// keep what the runtime read from them; a limit of 0 leaves none.
func TestApplyGCSetsTheCollectorUnlessTheEnvironmentDid(t *testing.T) {
	p0, l0 := gcNow()
	t.Cleanup(func() {
		debug.SetGCPercent(p0)
		debug.SetMemoryLimit(l0)
	})
	log := zap.NewNop()

	unsetenv(t, "GOGC", "GOMEMLIMIT")
	applyGC(config.GC{Percent: 300, MemoryLimitMB: 64}, log)
	if p, l := gcNow(); p != 300 || l != 64<<20 {
		t.Fatalf("percent %d limit %d, want 300 and 64 MiB", p, l)
	}

	debug.SetGCPercent(150)
	debug.SetMemoryLimit(128 << 20)
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "128MiB")
	applyGC(config.GC{Percent: 300, MemoryLimitMB: 64}, log)
	if p, l := gcNow(); p != 150 || l != 128<<20 {
		t.Fatalf("with GOGC and GOMEMLIMIT set: percent %d limit %d, want theirs (150, 128 MiB)", p, l)
	}

	unsetenv(t, "GOGC", "GOMEMLIMIT")
	applyGC(config.GC{Percent: 200}, log)
	if p, l := gcNow(); p != 200 || l != 128<<20 {
		t.Fatalf("limit 0: percent %d limit %d, want 200 and the limit left as it was", p, l)
	}
}

// unsetenv removes the variables for the rest of the test; t.Setenv's
// cleanup puts back what the environment held.
func unsetenv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}
