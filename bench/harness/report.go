package main

import (
	"fmt"
	"strings"
	"time"

	"seckill/bench/benchkit"
)

// report collects one run's numbers and renders the table.
type report struct {
	opts    options
	started time.Time

	// naive is the seed-script EVALSHA reference, the yardstick; evalsha
	// the project's occupy script as it stood at d9a4ed0.
	bare, bare2, naive, evalsha, sync benchkit.WrkResult
	syncRun                           bool
	accept, reject, seed, poll        benchkit.WrkResult
	// naiveAfter is the yardstick's second run, right after (a);
	// bareNear are the bare runs right before and after (b);
	// rejectProfiled is (b') (zero when not profiled).
	naiveAfter     benchkit.WrkResult
	bareNear       [2]benchkit.WrkResult
	bareNearCost   [2]cost
	rejectCost     cost // (b): the CPU of seckill dev's process per answer
	rejectProfiled benchkit.WrkResult
	// How long (b) and the bare runs beside it waited for seckill dev to
	// be idle, and its share of a core over the last second of the wait.
	// catchUp is seckill dev's CPU from (a)'s drain to the end of the
	// reconciler's next pass (catchUpWait later; catchUpEnded false: the
	// wait gave up).
	catchUp          cost
	catchUpWait      time.Duration
	catchUpEnded     bool
	idleBeforeReject time.Duration
	idleShare        float64
	idle             bool
	big              benchkit.WrkResult
	bigRun           bool
	seedOrders       int64

	drain      drain
	insertRefs []benchkit.InsertRef
	check      check

	acceptProf, rejectProf profiled

	// Where the CPU goes: the EVALSHA references, (a) and (f).
	// naiveCost pools naiveCosts, the yardstick's two runs.
	naiveCost, refCost, devCost, partsCost cost
	naiveCosts                             [2]cost
	parts                                  benchkit.WrkResult
	partsRun                               bool
	partsCheck                             check
}

func ms(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func (r *report) render() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "\n## seckill bench — %s\n\n", r.started.UTC().Format(time.RFC1123))
	b.WriteString(machine())
	fmt.Fprintf(&b, "- wrk -t%d -c%d -d%v --latency, all on 127.0.0.1; system: %s; (f): --config %s\n", o.threads, o.conns, o.dur, o.devCommand(), o.partsConfig())
	b.WriteString("- vs bare: against the mean of the bare runs at the start and at the end; the reject target is against the mean of\n" +
		"  the bare runs right before and right after (b), and (b) runs without a profiler, as bare does ((b') is profiled)\n" +
		"- vs seed EVALSHA, and every target against the seed-script reference: against the mean of its runs right before\n" +
		"  and right after (a) (its CPU and commands: both runs pooled)\n\n")

	b.WriteString("| run | conns | req/s | p50 | p99 | answers | vs bare | vs seed EVALSHA | vs occupy EVALSHA | vs sync |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n")
	// The bare reference runs first and last; "vs bare" is against the
	// mean of both, which evens out a machine that drifts during the run.
	bareRPS := (r.bare.RPS + r.bare2.RPS) / 2
	bareP99 := (r.bare.P99 + r.bare2.P99) / 2
	// The yardstick runs right before and right after (a); its ratios and
	// targets take the mean of both (the first alone when only it ran).
	seed := r.naive
	if r.naiveAfter.RPS > 0 {
		seed = benchkit.WrkResult{RPS: (r.naive.RPS + r.naiveAfter.RPS) / 2, P99: (r.naive.P99 + r.naiveAfter.P99) / 2}
	}
	row := func(name string, conns int, w benchkit.WrkResult) {
		vsSync := "-"
		if r.syncRun {
			vsSync = ratio(w.RPS, r.sync.RPS)
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %s | %s | %s | %s | %s | %s | %s |\n", name, conns, w.RPS, ms(w.P50), ms(w.P99),
			w.CodesString(), ratio(w.RPS, bareRPS), ratio(w.RPS, seed.RPS), ratio(w.RPS, r.evalsha.RPS), vsSync)
	}
	row("ref: bare fasthttp", o.conns, r.bare)
	row(refOccupyName, o.conns, r.evalsha)
	if r.syncRun {
		row("ref: seed sync path (MariaDB tx/req)", o.conns, r.sync)
	}
	row(refSeedName, o.conns, r.naive)
	row("(a) accept: distinct buyers, SKU 2001", o.conns, r.accept)
	if r.naiveAfter.RPS > 0 {
		row(refSeedName+", again right after (a)", o.conns, r.naiveAfter)
	}
	row("ref: bare fasthttp, right before (b)", o.conns, r.bareNear[0])
	row("(b) reject: sold-out SKU 2002", o.conns, r.reject)
	row("ref: bare fasthttp, right after (b)", o.conns, r.bareNear[1])
	if r.rejectProfiled.RPS > 0 {
		row("(b') reject, CPU-profiled for "+o.profile.String(), o.conns, r.rejectProfiled)
	}
	row("(c) seed flash_sale.lua (unmodified)", o.conns, r.seed)
	row("(d) result polling", o.conns, r.poll)
	if r.bigRun {
		row("(e) accept from many connections", o.bigConns, r.big)
	}
	if r.partsRun {
		row("(f) accept: parts as processes, SKU 2001", o.conns, r.parts)
	}
	row("ref: bare fasthttp, again at the end", o.conns, r.bare2)

	// Drain rows: rows/s in the req/s column, ratios to the raw INSERT
	// IGNORE references instead of the HTTP ones.
	for _, ref := range r.insertRefs {
		fmt.Fprintf(&b, "| ref: raw %d-row INSERT IGNORE, %s (rows/s) | - | %.0f | - | - | %d rows in %v | - | - | - | - |\n",
			ref.Batch, ref.Name, ref.Rate(), ref.Rows, ref.Took.Round(time.Millisecond))
	}
	// The consumer kept up with (a) when its backlog at the end was small;
	// its capacity then shows as orders per consumer CPU-second in (a)'s
	// profile (one core's worth), next to the references' one-client rate.
	p := r.acceptProf
	if c := p.consumerRowsPerCPUSecond(); c > 0 {
		vs := make([]string, 0, len(r.insertRefs))
		for _, ref := range r.insertRefs {
			vs = append(vs, ratio(c, ref.Rate())+" of "+ref.Name)
		}
		fmt.Fprintf(&b, "| consumer, Kafka → SQLite: orders per consumer CPU-second in (a) | - | %.0f | - | - | %d orders on %.2f CPU-s in %v; %s | - | - | - | - |\n",
			c, p.orders, p.consumerCPU, o.profile, strings.Join(vs, ", "))
	}
	fmt.Fprintf(&b, "| consumer drain after (a) (rows/s) | - | %.0f | - | - | backlog %d at the end of (a), %d orders in %v | - | - | - | - |\n",
		r.drain.rate(), r.drain.Backlog, r.drain.Orders, r.drain.Took.Round(time.Millisecond))

	b.WriteString("\nTargets (ratios from this run):\n\n")
	target := func(ok bool, f string, a ...any) {
		mark := "MISSED"
		if ok {
			mark = "reached"
		}
		fmt.Fprintf(&b, "- %s: %s\n", mark, fmt.Sprintf(f, a...))
	}
	// Every accept target is stated against the seed-script reference; the
	// heavier occupy-script reference (d9a4ed0's script) is the second line.
	refs := []struct {
		name string
		w    benchkit.WrkResult
		c    cost
	}{{"the seed-script EVALSHA reference", seed, r.naiveCost}, {"the occupy-script EVALSHA reference", r.evalsha, r.refCost}}
	for i, ref := range refs {
		aim := ""
		if i == 0 {
			aim = " (aim 1.0×)"
		}
		target(r.accept.RPS >= 0.5*ref.w.RPS, "accept ≥ 0.5× %s%s — %s (%.0f vs %.0f req/s)", ref.name, aim, ratio(r.accept.RPS, ref.w.RPS), r.accept.RPS, ref.w.RPS)
	}
	nearRPS := (r.bareNear[0].RPS + r.bareNear[1].RPS) / 2
	// A reference that did not run judges nothing: the target is missed.
	target(nearRPS > 0 && r.reject.RPS >= 0.9*nearRPS, "reject ≥ 0.9× bare (mean of the bare runs right before and after (b)) — %s (%.0f vs %.0f req/s)",
		ratio(r.reject.RPS, nearRPS), r.reject.RPS, nearRPS)
	target(bareRPS > 0 && r.reject.RPS >= 0.9*bareRPS, "reject ≥ 0.9× bare (mean of the first and last run) — %s", ratio(r.reject.RPS, bareRPS))
	if bc := pooled("bare", r.bareNearCost[:]...); r.rejectCost.ok() && bc.ok() {
		// Not a target: the cost behind the reject ratio, which wrk's own
		// share of the two cores dilutes.
		rc, bareC := r.rejectCost.perBuyer(roleServer), bc.perBuyer(roleServer)
		fmt.Fprintf(&b, "- (the cost behind it) reject: seckill dev's CPU per answer %.2f µs vs the bare server's per request %.2f µs (%s; all of seckill dev's process, its idle parts included)\n",
			rc, bareC, ratio(rc, bareC))
	}
	if r.rejectCost.ok() {
		state := "idle"
		if !r.idle {
			state = "still busy"
		}
		fmt.Fprintf(&b, "- (b) and the bare runs beside it started once seckill dev was %s: after %v, at %.1f%% of a core\n",
			state, r.idleBeforeReject, 100*r.idleShare)
	}
	for _, ref := range refs {
		target(r.accept.P99 <= 3*ref.w.P99, "p99(accept) ≤ 3× p99 of %s at -c%d — %s vs %s (%s)", ref.name, o.conns, ms(r.accept.P99), ms(ref.w.P99),
			ratio(float64(r.accept.P99), float64(ref.w.P99)))
	}
	target(r.accept.P99 <= 3*bareP99, "p99(accept) ≤ 3× p99(bare) at -c%d — %s vs %s (%s)", o.conns, ms(r.accept.P99), ms(bareP99),
		ratio(float64(r.accept.P99), float64(bareP99)))
	if r.syncRun {
		target(r.accept.RPS >= 10*r.sync.RPS, "accept ≥ 10× sync baseline — %s", ratio(r.accept.RPS, r.sync.RPS))
	}
	if r.bigRun {
		bad := r.big.Codes["503"] + r.big.Codes["other"] + r.big.SockErrors()
		target(bad == 0, "-c%d: no answers but 200/409/410/429 and no socket errors — %s; p99 %s", o.bigConns, r.big.CodesString(), ms(r.big.P99))
	}
	for _, c := range []cost{r.devCost, r.partsCost} {
		if !c.ok() {
			continue
		}
		redis := c.perBuyer(roleRedisDef, roleRedisHot)
		for i, ref := range refs {
			if !ref.c.ok() {
				continue
			}
			bound := []float64{1.2, 1.0}[i]
			refRedis := ref.c.perBuyer(roleRedisDef, roleRedisHot)
			target(redis <= bound*refRedis, "%s: Redis CPU per accepted buyer ≤ %.1f× %s's per request — %.1f µs vs %.1f µs (%s)",
				c.name, bound, ref.name, redis, refRedis, ratio(redis, refRedis))
		}
		if share, ok := c.scanShare(c.redisRoles()...); ok {
			target(share <= 0.02, "%s: scans of whole sets ≤ 2%% of Redis CPU while selling — %.1f%%", c.name, 100*share)
		}
	}
	if c := r.partsCost; c.ok() {
		for _, ref := range refs {
			if !ref.c.ok() {
				continue
			}
			srv, refSrv := c.perBuyer(roleServer), ref.c.perBuyer(roleServer)
			target(srv <= 2*refSrv, "%s: edge+engine CPU per accepted buyer ≤ 2× %s server's per request — %.1f µs vs %.1f µs (%s)",
				c.name, ref.name, srv, refSrv, ratio(srv, refSrv))
		}
	}
	if c := r.catchUp; c.ok() {
		// Not a target: work (a) leaves behind, which its row does not
		// count.
		end := "the end of the reconciler's first pass after it"
		if !r.catchUpEnded {
			end = "the wait's bound (no pass ended)"
		}
		// The wait's own idle CPU is part of it: priced at the idle share
		// measured right after, before (b).
		idleUS := r.idleShare * float64(r.catchUpWait.Microseconds()) / float64(c.accepted)
		fmt.Fprintf(&b, "- (after (a), not in its row) seckill dev and its redis-servers from the drain to %s, %v later: %.1f µs per accepted buyer (server %.1f, Redis %.1f), of which %.1f is what they spend idle over as long (%.1f%% of a core, measured right after)\n",
			end, r.catchUpWait.Round(time.Second), c.perBuyer(), c.perBuyer(roleServer), c.perBuyer(roleRedisDef, roleRedisHot), idleUS, 100*r.idleShare)
	}
	ref, rows := r.naiveCost, []cost{r.refCost, r.devCost, r.partsCost}
	if !ref.ok() {
		ref, rows = r.refCost, rows[1:]
	} else if r.naiveCosts[1].ok() {
		// The pooled yardstick is the reference; its two runs show how far
		// the machine moved across (a).
		rows = append([]cost{r.naiveCosts[0], r.naiveCosts[1]}, rows...)
	}
	if ref.ok() {
		renderCosts(&b, ref, rows)
		renderBreakdown(&b, r.devCost, r.acceptProf.parts, ref)
	}

	b.WriteString("\nCorrectness:\n\n")
	for _, l := range r.check.Lines {
		b.WriteString("    " + l + "\n")
	}
	if r.partsRun {
		b.WriteString("  (f), the parts as processes:\n")
		for _, l := range r.partsCheck.Lines {
			b.WriteString("    " + l + "\n")
		}
	}
	if r.acceptProf.cpuTop != "" {
		fmt.Fprintf(&b, "\nCPU profile of seckill during (a), %v (top):\n\n%s\n", o.profile, indent(head(r.acceptProf.cpuTop, 30)))
		fmt.Fprintf(&b, "Allocations (objects) during (a):\n\n%s\n", indent(head(r.acceptProf.allocTop, 22)))
	}
	if r.rejectProf.cpuTop != "" {
		fmt.Fprintf(&b, "CPU profile of seckill during (b'), %v (top):\n\n%s\n", o.profile, indent(head(r.rejectProf.cpuTop, 30)))
		fmt.Fprintf(&b, "Allocations (objects) during (b'):\n\n%s\n", indent(head(r.rejectProf.allocTop, 22)))
	}
	return b.String()
}

func head(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
