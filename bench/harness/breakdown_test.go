package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

func TestParseShowing(t *testing.T) {
	for in, want := range map[string]float64{
		"Active filters:\n   focus=x\nShowing nodes accounting for 1.23s, 50.00% of 2.46s total\n": 1.23,
		"Showing nodes accounting for 870ms, 100% of 870ms total\n":                                0.87,
		"Main binary filename not available.\n":                                                    0,
	} {
		if got := parseShowing(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("parseShowing(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestDevPartsAreGoRegexps(t *testing.T) {
	for _, p := range devParts {
		if _, err := regexp.Compile(p.funcs); err != nil {
			t.Errorf("%s: %v", p.name, err)
		}
	}
}

// cpuTime is this process' user + system CPU time.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:noinline
func burnOuter(t *testing.T, cpu time.Duration) (n int) {
	// CPU time, not wall time: on a busy machine a second of wall time
	// may hold a few samples only.
	until, deadline := cpuTime(t)+cpu, time.Now().Add(time.Minute)
	for cpuTime(t) < until && time.Now().Before(deadline) {
		n += burnInner(1000)
		for i := range 1000 {
			n ^= i * n
		}
	}
	return n
}

//go:noinline
func burnInner(k int) (n int) {
	for i := range k {
		n += i * i
	}
	return n
}

// TestSplitProfileCountsEachSampleOnce profiles this test burning CPU in
// burnOuter, which calls burnInner: with inner tried first, inner's part
// holds the samples inside burnInner, outer's the rest of burnOuter's
// (not burnInner's again), and the shares add up to one.
func TestSplitProfileCountsEachSampleOnce(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(t.TempDir(), "cpu.pb.gz")
	f, err := os.Create(prof)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		t.Fatal(err)
	}
	sink := burnOuter(t, 500*time.Millisecond)
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := splitProfile(bin, prof, []part{{"inner", `harness\.burnInner$`}, {"outer", `harness\.burnOuter$`}})
	if err != nil {
		t.Fatal(err)
	}
	if !b.ok() {
		t.Fatalf("no breakdown of a profile of 500ms of CPU (sink %d): %+v", sink, b)
	}
	if len(b.shares) != 3 || b.shares[0] <= 0 || b.shares[1] <= 0 {
		t.Fatalf("shares %v of %.2fs: want some in burnInner and some in burnOuter alone", b.shares, b.total)
	}
	if sum := b.shares[0] + b.shares[1] + b.shares[2]; math.Abs(sum-1) > 1e-6 {
		t.Fatalf("shares %v add up to %v", b.shares, sum)
	}
	// burnOuter's part excludes burnInner's samples: the two parts
	// together are what burnOuter's stacks hold, not more.
	all, err := profileSeconds(bin, prof, `harness\.burnOuter$`, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := (b.shares[0] + b.shares[1]) * b.total; math.Abs(got-all) > 0.011 {
		t.Fatalf("inner + outer = %.3fs, burnOuter's stacks %.3fs: a sample counted twice or lost", got, all)
	}
}
