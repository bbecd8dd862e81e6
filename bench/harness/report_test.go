package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"seckill/bench/benchkit"
)

// TestRejectTargetIsAgainstTheBareRunsAroundIt: the reject ratio is taken
// against the bare runs next to (b), not those at the harness' ends.
func TestRejectTargetIsAgainstTheBareRunsAroundIt(t *testing.T) {
	r := &report{opts: options{conns: 256, threads: 2}}
	r.bare, r.bare2 = benchkit.WrkResult{RPS: 200}, benchkit.WrkResult{RPS: 200}
	r.bareNear = [2]benchkit.WrkResult{{RPS: 90}, {RPS: 110}}
	r.reject = benchkit.WrkResult{RPS: 95}
	r.rejectCost = cost{name: "(b)", accepted: 1000, window: time.Second, cpu: map[string]time.Duration{roleServer: 12 * time.Millisecond}}
	r.bareNearCost = [2]cost{
		{name: "b0", accepted: 1000, window: time.Second, cpu: map[string]time.Duration{roleServer: 9 * time.Millisecond}},
		{name: "b1", accepted: 3000, window: time.Second, cpu: map[string]time.Duration{roleServer: 31 * time.Millisecond}},
	}
	text := r.render()
	for _, want := range []string{
		"reject: seckill dev's CPU per answer 12.00 µs vs the bare server's per request 10.00 µs (1.20×;",
		"- reached: reject ≥ 0.9× bare (mean of the bare runs right before and after (b)) — 0.95× (95 vs 100 req/s)",
		"- MISSED: reject ≥ 0.9× bare (mean of the first and last run) — 0.47×",
		"| ref: bare fasthttp, right before (b) |",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "(b') reject") {
		t.Errorf("a (b') row without a profiled run:\n%s", text)
	}
}

// TestSeedTargetsAreAgainstBothRunsAroundAccept: the accept targets take
// the mean of the yardstick's runs on both sides of (a), and its CPU the
// two runs pooled.
func TestSeedTargetsAreAgainstBothRunsAroundAccept(t *testing.T) {
	r := &report{opts: options{conns: 256, threads: 2}}
	r.bare, r.bare2 = benchkit.WrkResult{RPS: 200}, benchkit.WrkResult{RPS: 200}
	r.naive = benchkit.WrkResult{RPS: 30000, P99: 10 * time.Millisecond}
	r.naiveAfter = benchkit.WrkResult{RPS: 50000, P99: 20 * time.Millisecond}
	r.accept = benchkit.WrkResult{RPS: 21000, P99: 46 * time.Millisecond}
	text := r.render()
	for _, want := range []string{
		"- reached: accept ≥ 0.5× the seed-script EVALSHA reference (aim 1.0×) — 0.53× (21000 vs 40000 req/s)",
		"- MISSED: p99(accept) ≤ 3× p99 of the seed-script EVALSHA reference at -c256 — 46.00 ms vs 15.00 ms (3.07×)",
		// No bare run beside (b): nothing to judge it by.
		"- MISSED: reject ≥ 0.9× bare (mean of the bare runs right before and after (b)) — -",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
}

// TestPooledWeighsRunsByTheirRequests: two runs pooled give the CPU and
// commands per request of both together, not the mean of their rates.
func TestPooledWeighsRunsByTheirRequests(t *testing.T) {
	a := cost{name: "a", accepted: 100, window: time.Second,
		cpu:  map[string]time.Duration{roleServer: 1000 * time.Microsecond, roleRedisDef: 500 * time.Microsecond},
		cmds: map[string]map[string]cmdStat{roleRedisDef: {"evalsha": {calls: 100, usec: 400}}}}
	b := cost{name: "b", accepted: 300, window: time.Second,
		cpu:  map[string]time.Duration{roleServer: 1800 * time.Microsecond, roleRedisDef: 3500 * time.Microsecond},
		cmds: map[string]map[string]cmdStat{roleRedisDef: {"evalsha": {calls: 300, usec: 3600}}}}
	p := pooled("both", a, b, cost{name: "empty"})
	if got := p.perBuyer(roleServer); got != 7 {
		t.Errorf("server µs per request %v, want 7 (2800 µs over 400)", got)
	}
	if got := p.perBuyer(roleRedisDef); got != 10 {
		t.Errorf("redis µs per request %v, want 10 (4000 µs over 400)", got)
	}
	if got := p.cmds[roleRedisDef]["evalsha"]; got != (cmdStat{calls: 400, usec: 4000}) {
		t.Errorf("pooled evalsha %+v, want 400 calls, 4000 µs", got)
	}
	if p.window != 2*time.Second || p.accepted != 400 {
		t.Errorf("pooled window %v accepted %d", p.window, p.accepted)
	}
	// The inputs are left as they were.
	if a.cmds[roleRedisDef]["evalsha"].calls != 100 {
		t.Errorf("pooled changed its input")
	}
}

// TestUntilIdleWaitsForAQuietWindow: the wait ends at the first window in
// which the processes used less than the share, and gives up at the bound
// (or at a failed sample) without calling the processes idle.
func TestUntilIdleWaitsForAQuietWindow(t *testing.T) {
	const window = time.Second
	var used time.Duration
	busy := 3 // windows at 80% of a core, then 1%
	cpu := func() (time.Duration, error) { return used, nil }
	sleep := func(d time.Duration) {
		if busy > 0 {
			busy--
			used += d * 8 / 10
		} else {
			used += d / 100
		}
	}
	waited, share, idle := untilIdle(cpu, sleep, 0.05, window, time.Minute)
	if !idle || waited != 4*window || share < 0.009 || share > 0.011 {
		t.Fatalf("quiet after three busy windows: waited %v, share %v, idle %v", waited, share, idle)
	}

	busy = 1 << 30
	waited, share, idle = untilIdle(cpu, sleep, 0.05, window, 5*window)
	if idle || waited != 5*window || share < 0.79 {
		t.Fatalf("never quiet: waited %v, share %v, idle %v", waited, share, idle)
	}

	calls := 0
	failing := func() (time.Duration, error) {
		if calls++; calls > 2 {
			return 0, errors.New("gone")
		}
		return used, nil
	}
	busy = 1 << 30
	if waited, _, idle = untilIdle(failing, sleep, 0.05, window, time.Minute); idle || waited != 2*window {
		t.Fatalf("a failed sample: waited %v, idle %v", waited, idle)
	}
}

// TestRunsTotalSumsTheOutcomes: the reconciler's passes are counted over
// every outcome, and a process that has not ended one yet has none.
func TestRunsTotalSumsTheOutcomes(t *testing.T) {
	const exposition = `# HELP seckill_reconcile_runs_total Reconciliations by outcome.
# TYPE seckill_reconcile_runs_total counter
seckill_reconcile_runs_total{outcome="error"} 1
seckill_reconcile_runs_total{outcome="ok"} 3
# HELP seckill_reconcile_drift Drift found by the last reconciliation, per SKU and kind (0: none).
# TYPE seckill_reconcile_drift gauge
seckill_reconcile_drift{activity="1",kind="ledger",sku="2"} 5
`
	if n, err := runsTotal(strings.NewReader(exposition)); err != nil || n != 4 {
		t.Fatalf("runs: %v %v, want 4", n, err)
	}
	if n, err := runsTotal(strings.NewReader("# TYPE up gauge\nup 1\n")); err != nil || n != 0 {
		t.Fatalf("no passes yet: %v %v", n, err)
	}
	if _, err := runsTotal(strings.NewReader("not {an exposition\n")); err == nil {
		t.Fatal("a broken exposition read as passes")
	}
}
