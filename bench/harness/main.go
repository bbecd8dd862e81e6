// Command harness is `make bench`'s load test: it builds and starts the
// system (`seckill dev` with no config file, make run's configuration; its own data directory,
// loopback listeners) and three reference servers, drives each with wrk on
// 127.0.0.1, checks afterwards that every accepted ticket became exactly one
// order, and prints one table of req/s, p50/p99 and ratios to the
// references measured in the same run:
//
//   - bare:    a fasthttp handler that only answers (bench/refs/bare)
//   - evalsha: fasthttp + one rueidis EVALSHA per request (bench/refs/evalsha) of seed
//     001 §9.2's script, the yardstick, and, a second row, of the occupy script as it
//     stood at d9a4ed0
//   - sync:    the seed's synchronous path, UPDATE … stock - 1 … AND stock > 0
//   - INSERT in one MariaDB transaction per request (bench/refs/syncdb)
//
// Scenarios on the system: (a) accept — distinct buyers on a SKU whose stock
// outlasts the run; (b) reject — a sold-out SKU, between two bare runs
// that its ratio is taken against, then once more CPU-profiled as (b');
// (c) the seed's
// bench/flash_sale.lua unmodified; (d) result polling; (e) the accept load
// from -bigc (10,000) connections; then (f) the accept load on the parts as
// separate processes (seckill broker, edge, consumer; -parts). It also
// measures how fast the consumer drains the accept backlog against a raw
// batched INSERT IGNORE reference, takes CPU and allocation profiles of (a)
// and (b'), and tells where the CPU goes: CPU-µs per accepted buyer of each
// process and redis-server, and Redis commands per accepted buyer, for the
// EVALSHA reference, (a) and (f) (cost.go).
//
// Everything it starts is stopped by PID before it exits; MariaDB comes and
// goes through testenv.LaunchMariaDB. Run from the repository root:
//
//	go run ./bench/harness [-d 10s] [-c 256] [-bigc 10000] [-out bench/out]
//
// -slow runs only the slow-dependency figures instead (slow.go).
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"seckill/bench/benchkit"
)

type options struct {
	dur, profile       time.Duration
	threads, conns     int
	bigConns           int
	out, config, root  string
	noSync, parts      bool
	slow               bool
	seckillBin         string
	drainRows, drainBt int
}

func main() {
	var o options
	flag.DurationVar(&o.dur, "d", 10*time.Second, "duration of each wrk run")
	flag.IntVar(&o.threads, "t", 2, "wrk threads")
	flag.IntVar(&o.conns, "c", 256, "wrk connections")
	flag.IntVar(&o.bigConns, "bigc", 10000, "connections of the many-connections run (e); 0 skips it")
	flag.DurationVar(&o.profile, "profile", 5*time.Second, "CPU profile length inside (a) and (b'); 0 skips profiling and (b')")
	flag.StringVar(&o.out, "out", "bench/out", "directory for logs, wrk reports, profiles and the table")
	flag.StringVar(&o.config, "config", "", "the system's configuration file; empty: none, seckill dev's built-in defaults (make run's configs/dev.yaml), and configs/dev.yaml for the parts of (f)")
	flag.BoolVar(&o.noSync, "no-sync", false, "skip the MariaDB references (sync baseline, INSERT IGNORE)")
	flag.BoolVar(&o.parts, "parts", true, "run (f): the accept load on seckill broker, edge and consumer as separate processes, for the CPU per part")
	flag.BoolVar(&o.slow, "slow", false, "run only the slow-dependency figures (slow.go): a Redis stall, a slow broker, a slow database, on the parts")
	flag.StringVar(&o.seckillBin, "seckill", "", "a prebuilt seckill binary to run instead of building ./cmd/seckill")
	flag.IntVar(&o.drainRows, "drain-rows", 200000, "rows of the INSERT IGNORE reference")
	flag.IntVar(&o.drainBt, "drain-batch", 500, "rows per INSERT IGNORE statement of the reference")
	flag.Parse()
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	o.root = root
	benchkit.Main("harness", func() error { return run(o) }, benchkit.StopAll)
}

// db is the MariaDB the run started, if any (benchkit.StopAll stops it).
var db *benchkit.MariaDB

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "harness:", err)
	os.Exit(1)
}

func logf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s harness: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(f, a...))
}

func run(o options) error {
	out, err := filepath.Abs(o.out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	nofile, err := benchkit.RaiseFileLimit()
	if err != nil {
		return fmt.Errorf("raise the open-file limit: %w", err)
	}
	if o.bigConns > 0 && nofile < uint64(o.bigConns)+1024 {
		logf("open-file limit %d is too low for -bigc %d; skipping (e)", nofile, o.bigConns)
		o.bigConns = 0
	}
	for _, tool := range []string{"wrk", "redis-server"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (make deps installs it)", tool)
		}
	}
	bin := filepath.Join(out, "bin")
	if o.slow {
		seckillBin := o.seckillBin
		if seckillBin == "" {
			seckillBin = filepath.Join(bin, "seckill")
			build := exec.Command("go", "build", "-o", bin+"/", "./cmd/seckill")
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				return fmt.Errorf("go build: %w", err)
			}
		}
		return runSlow(out, seckillBin, o)
	}
	logf("building seckill and the reference servers into %s", bin)
	pkgs := []string{"./bench/refs/bare", "./bench/refs/evalsha", "./bench/refs/syncdb"}
	seckillBin := o.seckillBin
	if seckillBin == "" {
		pkgs = append(pkgs, "./cmd/seckill")
		seckillBin = filepath.Join(bin, "seckill")
	}
	build := exec.Command("go", append([]string{"build", "-o", bin + "/"}, pkgs...)...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	accept := filepath.Join(o.root, "bench", "accept.lua")
	std := func(url string, args ...string) benchkit.Load {
		return benchkit.Load{Threads: o.threads, Conns: o.conns, Dur: o.dur, Timeout: 5 * time.Second, Script: accept, URL: url, Args: args}
	}
	r := &report{opts: o, started: time.Now()}

	// References.
	if r.bare, _, err = runBare(out, bin, "ref-bare", "ref bare", std); err != nil {
		return err
	}
	// The EVALSHA references, each on its own fresh redis-server: the
	// project's occupy script as it stood at d9a4ed0 (the heavier one),
	// then, last before the system starts, the seed's §9.2 script (the
	// yardstick), which runs once more right after (a).
	if r.evalsha, r.refCost, err = runEvalsha(out, bin, "stock", "stock", refOccupyName, std); err != nil {
		return err
	}
	if !o.noSync {
		logf("starting MariaDB")
		if db, err = benchkit.StartMariaDB(); err != nil {
			return err
		}
		addr := benchkit.FreeAddr()
		p, err := benchkit.Start(out, "ref-syncdb", filepath.Join(bin, "syncdb"), nil, "-listen", addr, "-dsn", db.DSN)
		if err != nil {
			return err
		}
		if err := benchkit.WaitPort(p, addr, 20*time.Second); err != nil {
			return err
		}
		logf("ref sync: wrk -c%d %v", o.conns, o.dur)
		if r.sync, err = benchkit.RunWrk(out, "ref-sync", std("http://"+addr+"/api/v1/flash-sale/order", "1", "0")); err != nil {
			return err
		}
		p.StopWithin(10 * time.Second)
		r.syncRun = true
		logf("drain reference: %d rows in %d-row INSERT IGNORE batches (MariaDB)", o.drainRows, o.drainBt)
		ref, err := benchkit.MySQLInsertRef(db.DSN, o.drainRows, o.drainBt)
		if err != nil {
			return fmt.Errorf("INSERT IGNORE reference: %w", err)
		}
		r.insertRefs = append(r.insertRefs, ref)
		db.Stop()
	}
	logf("drain reference: %d rows in %d-row INSERT OR IGNORE batches (SQLite)", o.drainRows, o.drainBt)
	ref, err := benchkit.SQLiteInsertRef(out, o.drainRows, o.drainBt)
	if err != nil {
		return fmt.Errorf("SQLite INSERT reference: %w", err)
	}
	r.insertRefs = append(r.insertRefs, ref)

	if r.naive, r.naiveCosts[0], err = runEvalsha(out, bin, "seed", "seed", refSeedName, std); err != nil {
		return err
	}

	// The system.
	logf("starting %s", o.devCommand())
	sys, err := startSystem(out, seckillBin, o.configPath())
	if err != nil {
		return err
	}
	acceptKey := skuKey{benchActivity, acceptSKU}
	url := sys.orderURL()

	// (a) accept path, profiled in the middle.
	logf("(a) accept: wrk -c%d %v on SKU %d", o.conns, o.dur, acceptSKU)
	m := measure(sys.watch)
	prof := r.startProfile(sys, out, "accept", o)
	if r.accept, err = benchkit.RunWrk(out, "a-accept", std(url, fmt.Sprint(acceptSKU), "1000000000000")); err != nil {
		return err
	}
	r.acceptProf = prof()
	sys.accepted[acceptKey] += r.accept.Codes["200"]
	sys.unseen[acceptKey] += r.accept.Unanswered()
	logf("(a) done; waiting for the consumer to drain the backlog")
	if r.drain, err = sys.waitDrained(5 * time.Minute); err != nil {
		return err
	}
	note := "seckill dev: edge, engine, broker, consumer and SQLite in one process (the edge+engine column), its two redis-server children"
	if o.profile > 0 && o.profile < o.dur {
		note += fmt.Sprintf("; CPU-profiled for %v of the run (a few %% more CPU)", o.profile)
	}
	r.devCost = m.done("(a) accept, seckill dev (one process)", note, r.accept.Codes["200"])
	// What (a) leaves to do after the drain, the reconciler's audit of its
	// orders at its next pass, is measured from here to that pass's end.
	drained := time.Now()
	passes, passErr := sys.reconcilePasses()
	catchUp := measure(sys.watch)
	r.acceptProf.analyze()
	// The yardstick again, so that (a) is judged against the machine as it
	// was on both sides of it: the targets take the mean of both runs.
	if r.naiveAfter, r.naiveCosts[1], err = runEvalsha(out, bin, "seed", "seed-after", refSeedName+", again right after (a)", std); err != nil {
		return err
	}
	r.naiveCost = pooled(refSeedName+", both runs", r.naiveCosts[:]...)

	// (b) reject path: SKU 2002 was bought out at start. Its ratio is
	// against bare runs right before and right after it, so the machine's
	// drift over the whole harness does not land in it, and (b) runs
	// without a profiler, as the bare reference does: the profile comes
	// from a second run, (b'). All three wait for (a)'s catch-up to end
	// and for seckill dev to be idle.
	if passErr != nil {
		logf("the reconciler's passes cannot be read (%v): (b) does not wait for (a)'s audit", passErr)
	} else {
		r.catchUpEnded = sys.waitPass(passes, catchUpMax-time.Since(drained))
		r.catchUpWait = time.Since(drained)
		r.catchUp = catchUp.done("(a'') after (a): seckill dev from the drain to the end of the reconciler's next pass",
			"its background work: the audit of (a)'s orders, the sweeps; per (a)'s accepted buyer", r.accept.Codes["200"])
		if r.catchUpEnded {
			logf("the reconciler's first pass after the drain ended %v after it", r.catchUpWait.Round(time.Second))
		} else {
			logf("no reconciler pass ended within %v of the drain; measuring (b) anyway", catchUpMax)
		}
	}
	waited, share, idle := sys.waitIdle()
	if idle {
		logf("seckill dev idle (%.1f%% of a core) after %v", 100*share, waited)
	} else {
		logf("seckill dev still busy after %v (%.1f%% of a core over the last second); measuring (b) anyway", waited, 100*share)
	}
	r.idleBeforeReject, r.idleShare, r.idle = waited, share, idle
	if r.bareNear[0], r.bareNearCost[0], err = runBare(out, bin, "ref-bare-b0", "ref bare (before (b))", std); err != nil {
		return err
	}
	logf("(b) reject: wrk -c%d %v on sold-out SKU %d", o.conns, o.dur, soldOutSKU)
	m = measure(sys.watch)
	if r.reject, err = benchkit.RunWrk(out, "b-reject", std(url, fmt.Sprint(soldOutSKU), "2000000000000")); err != nil {
		return err
	}
	r.rejectCost = m.done("(b) reject", "seckill dev over the wrk run", r.reject.Requests)
	sys.accepted[skuKey{benchActivity, soldOutSKU}] += r.reject.Codes["200"]
	sys.unseen[skuKey{benchActivity, soldOutSKU}] += r.reject.Unanswered()
	if r.bareNear[1], r.bareNearCost[1], err = runBare(out, bin, "ref-bare-b1", "ref bare (after (b))", std); err != nil {
		return err
	}
	if o.profile > 0 && o.profile < o.dur {
		logf("(b') reject, CPU-profiled: wrk -c%d %v on sold-out SKU %d", o.conns, o.dur, soldOutSKU)
		prof = r.startProfile(sys, out, "reject", o)
		if r.rejectProfiled, err = benchkit.RunWrk(out, "b-reject-profiled", std(url, fmt.Sprint(soldOutSKU), "2500000000000")); err != nil {
			return err
		}
		r.rejectProf = prof()
		r.rejectProf.analyze()
		sys.accepted[skuKey{benchActivity, soldOutSKU}] += r.rejectProfiled.Codes["200"]
		sys.unseen[skuKey{benchActivity, soldOutSKU}] += r.rejectProfiled.Unanswered()
	}

	// (c) the seed's script, unmodified.
	logf("(c) seed flash_sale.lua: wrk -c%d %v", o.conns, o.dur)
	seed := benchkit.Load{Threads: o.threads, Conns: o.conns, Dur: o.dur, Timeout: 5 * time.Second,
		Script: filepath.Join(o.root, "bench", "flash_sale.lua"), URL: url}
	if r.seed, err = benchkit.RunWrk(out, "c-seed", seed); err != nil {
		return err
	}
	// flash_sale.lua counts nothing: its one buyer holds one ticket or none.
	if orders, _, err := sys.ordered(demoActivity); err == nil {
		r.seedOrders = orders
	}

	// (d) result polling of tickets bought just before.
	tickets := filepath.Join(out, "tickets.txt")
	if err := sys.tickets(tickets, 2000, 3_000_000_000_000); err != nil {
		return err
	}
	logf("(d) poll: wrk -c%d %v over 2000 tickets", o.conns, o.dur)
	poll := benchkit.Load{Threads: o.threads, Conns: o.conns, Dur: o.dur, Timeout: 5 * time.Second,
		Script: filepath.Join(o.root, "bench", "poll.lua"), URL: "http://" + sys.edge, Args: []string{tickets}}
	if r.poll, err = benchkit.RunWrk(out, "d-poll", poll); err != nil {
		return err
	}

	// (e) many connections.
	if o.bigConns > 0 {
		logf("(e) accept from %d connections: wrk -c%d %v", o.bigConns, o.bigConns, o.dur)
		big := std(url, fmt.Sprint(acceptSKU), "4000000000000")
		big.Conns, big.Timeout = o.bigConns, 10*time.Second
		if r.big, err = benchkit.RunWrk(out, "e-bigc", big); err != nil {
			return err
		}
		sys.accepted[acceptKey] += r.big.Codes["200"]
		sys.unseen[acceptKey] += r.big.Unanswered()
		r.bigRun = true
	}

	logf("waiting for every ticket to become an order")
	if _, err := sys.waitDrained(5 * time.Minute); err != nil {
		return err
	}
	// flash_sale.lua counts no answers; its buyer (one per thread, all
	// threads alike) may hold one order per distinct id: at most -t.
	sys.unseen[skuKey{demoActivity, seedSKU}] = int64(o.threads)
	r.check = sys.check()
	sys.stop()

	// (f) the accept load on the parts as separate processes: where the
	// CPU goes.
	if o.parts {
		if err := r.runParts(out, seckillBin, o, std); err != nil {
			return err
		}
	}

	// The bare reference once more: how much the machine drifted.
	if r.bare2, _, err = runBare(out, bin, "ref-bare2", "ref bare (again)", std); err != nil {
		return err
	}

	text := r.render()
	fmt.Print(text)
	if err := os.WriteFile(filepath.Join(out, "table.md"), []byte(text), 0o644); err != nil {
		return err
	}
	if !r.check.OK || r.partsRun && !r.partsCheck.OK {
		return fmt.Errorf("correctness check failed (see above)")
	}
	return nil
}

// configPath is the system's configuration file, "" for none.
func (o options) configPath() string {
	if o.config == "" {
		return ""
	}
	if filepath.IsAbs(o.config) {
		return o.config
	}
	return filepath.Join(o.root, o.config)
}

// partsConfig is the file the parts of (f) run on: -config, or the file
// seckill dev's built-in defaults are (the parts have no dev defaults).
func (o options) partsConfig() string {
	if o.config == "" {
		return filepath.Join(o.root, "configs", "dev.yaml")
	}
	return o.configPath()
}

// devCommand is how the system runs, for the table.
func (o options) devCommand() string {
	if o.config == "" {
		return "seckill dev (no config file: make run's configuration)"
	}
	return "seckill dev --config " + o.config
}

// Names of the EVALSHA reference rows.
const (
	refSeedName   = "ref: fasthttp + 1 EVALSHA seed §9.2 script/req"
	refOccupyName = "ref: fasthttp + 1 EVALSHA occupy/req"
)

// runBare measures bench/refs/bare on a process of its own, logged as
// what: wrk's result and the bare server's CPU over the run.
func runBare(out, bin, name, what string, std func(string, ...string) benchkit.Load) (benchkit.WrkResult, cost, error) {
	return runRef(out, name, what, filepath.Join(bin, "bare"), nil, nil, "the bare server over the wrk run", std,
		func(w benchkit.WrkResult) int64 { return w.Requests })
}

// runEvalsha measures bench/refs/evalsha with -script script on a fresh
// redis-server of its own: wrk's result and the cost row of the server and
// its Redis per request. tag names its files in out.
func runEvalsha(out, bin, script, tag, name string, std func(string, ...string) benchkit.Load) (benchkit.WrkResult, cost, error) {
	rp, raddr, err := benchkit.StartRedis(out, "ref-redis-"+tag, filepath.Join(out, "ref-redis-"+tag))
	if err != nil {
		return benchkit.WrkResult{}, cost{}, err
	}
	defer rp.StopWithin(10 * time.Second)
	return runRef(out, "ref-evalsha-"+tag, name, filepath.Join(bin, "evalsha"), []string{"-redis", raddr, "-script", script},
		[]watched{{role: roleRedisDef, pid: rp.PID(), redis: raddr}}, "the reference server and its redis-server, over the wrk run", std,
		func(w benchkit.WrkResult) int64 { return w.Codes["200"] })
}

// runRef starts the reference server exe (-listen and args) as name,
// drives it with the accept load and returns wrk's result and the cost,
// named what, of the server and of extra over the run, per served request.
func runRef(out, name, what, exe string, args []string, extra []watched, note string, std func(string, ...string) benchkit.Load,
	served func(benchkit.WrkResult) int64) (benchkit.WrkResult, cost, error) {
	addr := benchkit.FreeAddr()
	p, err := benchkit.Start(out, name, exe, nil, append([]string{"-listen", addr}, args...)...)
	if err != nil {
		return benchkit.WrkResult{}, cost{}, err
	}
	defer p.StopWithin(5 * time.Second)
	if err := benchkit.WaitPort(p, addr, 10*time.Second); err != nil {
		return benchkit.WrkResult{}, cost{}, err
	}
	load := std("http://"+addr+"/api/v1/flash-sale/order", "1", "0")
	logf("%s: wrk -c%d %v", what, load.Conns, load.Dur)
	m := measure(append([]watched{{role: roleServer, pid: p.PID()}}, extra...))
	w, err := benchkit.RunWrk(out, name, load)
	if err != nil {
		return w, cost{}, err
	}
	return w, m.done(what, note, served(w)), nil
}

// startProfile takes profiles in the middle of a run of o.dur; the returned
// func waits for them.
func (r *report) startProfile(sys *system, out, name string, o options) func() profiled {
	if o.profile <= 0 || o.profile >= o.dur {
		return func() profiled { return profiled{} }
	}
	ch := make(chan profiled, 1)
	go func() {
		time.Sleep((o.dur - o.profile) / 2)
		ch <- sys.profile(out, name, int(o.profile/time.Second))
	}()
	return func() profiled { return <-ch }
}

// machine describes where the run happened.
func machine() string {
	var b strings.Builder
	model := ""
	if cpu, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(cpu), "\n") {
			if strings.HasPrefix(l, "model name") {
				_, model, _ = strings.Cut(l, ":")
				model = strings.TrimSpace(model)
				break
			}
		}
	}
	kernel, _ := exec.Command("uname", "-sr").Output()
	wrkV, _ := exec.Command("sh", "-c", "wrk -v 2>&1 | head -1").Output()
	redisV, _ := exec.Command("redis-server", "--version").Output()
	fmt.Fprintf(&b, "- %d CPUs (%s), %s\n", runtime.NumCPU(), model, strings.TrimSpace(string(kernel)))
	fmt.Fprintf(&b, "- %s; %s; %s\n", runtime.Version(), strings.TrimSpace(string(wrkV)), strings.TrimSpace(string(redisV)))
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(&b, "- load average at the end: %s\n", strings.TrimSpace(string(la)))
	}
	return b.String()
}
