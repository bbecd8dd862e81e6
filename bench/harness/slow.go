package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"seckill/bench/benchkit"
	"seckill/internal/faultproxy"
	"seckill/internal/testenv"
)

// -slow: the system under a slow dependency, not a dead one. The parts run
// as separate processes (startPartsWith) on MariaDB, with the broker and
// the database behind fault proxies (internal/faultproxy). Each fault is
// measured the same way, one after the other on the same system, the
// first with no fault at all as the reference of the same run: wrk on the
// accept SKU for slowPre, then slowDuring with the fault in force, then
// slowPost after it healed. The figures of each: the answers by status,
// the share of 503, p99 while the fault lasted, and accepts/s in the
// slowPost after the heal against the slowPre before it — the floor the
// stall figures set: at most 5% 503, p99 ≤ engine.occupy_timeout + 100
// ms, at least 80% of the accepts/s within 2 s.
const (
	slowPre    = 3 * time.Second
	slowDuring = 6 * time.Second
	slowPost   = 2 * time.Second

	stallPause = 700 * time.Millisecond // of every second, CLIENT PAUSE … WRITE
)

// slowFault is one fault of -slow.
type slowFault struct {
	name         string
	inject, heal func() error
}

// slowRow is one fault's figures.
type slowRow struct {
	name            string
	pre, dur, post  benchkit.WrkResult
	drained         drain
	injectErr       error
	acceptedPerSec3 [3]float64
}

func (r slowRow) answers() int64 { return r.pre.Requests + r.dur.Requests + r.post.Requests }

func (r slowRow) code(c string) int64 { return r.pre.Codes[c] + r.dur.Codes[c] + r.post.Codes[c] }

func (r slowRow) share(c string) float64 {
	if n := r.answers(); n > 0 {
		return float64(r.code(c)) / float64(n)
	}
	return 0
}

func (r slowRow) recovery() float64 {
	if r.acceptedPerSec3[0] <= 0 {
		return 0
	}
	return r.acceptedPerSec3[2] / r.acceptedPerSec3[0]
}

// runSlow is the -slow run; it writes out/slow.md.
func runSlow(out, bin string, o options) error {
	logf("-slow: starting MariaDB")
	var err error
	if db, err = benchkit.StartMariaDB(); err != nil {
		return err
	}
	defer db.Stop()
	if _, err := testenv.MySQLDatabase(db.DSN, "seckill_slow"); err != nil {
		return err
	}
	host, err := dsnHost(db.DSN)
	if err != nil {
		return err
	}
	dbProxy, err := faultproxy.Start(host)
	if err != nil {
		return err
	}
	defer dbProxy.Close()
	brokerListen := benchkit.FreeAddr()
	brokerProxy, err := faultproxy.Start(brokerListen)
	if err != nil {
		return err
	}
	defer brokerProxy.Close()
	dsn := strings.Replace(db.DSN, "tcp("+host+")", "tcp("+dbProxy.Addr()+")", 1) + "seckill_slow?parseTime=true"
	logf("-slow: the parts on MariaDB through a fault proxy, the broker behind another")
	sys, err := startPartsWith(out, bin, o.partsConfig(), partsOpts{
		mysqlDSN: dsn, brokerListen: brokerListen, brokerAdvertise: brokerProxy.Addr()})
	if err != nil {
		sys.stop()
		return fmt.Errorf("-slow parts: %w", err)
	}
	defer sys.stop()
	hot := sys.watch[4].redis // roleRedisHot: the accept SKU's shard
	var stop chan struct{}
	var stalled chan error
	faults := []slowFault{
		{name: "none (the reference of this run)"},
		{name: fmt.Sprintf("hot shard: CLIENT PAUSE %d WRITE every 1s", stallPause.Milliseconds()),
			inject: func() error {
				stop, stalled = make(chan struct{}), make(chan error, 1)
				go func() { stalled <- stallRedis(hot, stop) }()
				return nil
			},
			heal: func() error { close(stop); return <-stalled }},
		{name: "broker: answers +200ms ± 100ms",
			inject: func() error {
				brokerProxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{Delay: 200 * time.Millisecond, Jitter: 100 * time.Millisecond})
				return nil
			},
			heal: func() error { brokerProxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{}); return nil }},
		{name: "database: answers +1s",
			inject: func() error {
				dbProxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{Delay: time.Second})
				return nil
			},
			heal: func() error { dbProxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{}); return nil }},
	}
	accept := filepath.Join(o.root, "bench", "accept.lua")
	key := skuKey{benchActivity, acceptSKU}
	var rows []slowRow
	for i, f := range faults {
		row := slowRow{name: f.name}
		seg := func(name string, d time.Duration, base int64) (benchkit.WrkResult, error) {
			l := benchkit.Load{Threads: o.threads, Conns: o.conns, Dur: d, Timeout: 5 * time.Second, Script: accept,
				URL: sys.orderURL(), Args: []string{fmt.Sprint(acceptSKU), fmt.Sprint(base)}}
			w, err := benchkit.RunWrk(out, fmt.Sprintf("slow-%d-%s", i, name), l)
			sys.accepted[key] += w.Codes["200"]
			sys.unseen[key] += w.Unanswered()
			return w, err
		}
		base := int64(10_000_000_000_000) * int64(i+1)
		logf("-slow %d/%d %s: wrk -c%d %v before, %v with the fault, %v after", i+1, len(faults), f.name, o.conns, slowPre, slowDuring, slowPost)
		if row.pre, err = seg("pre", slowPre, base); err != nil {
			return err
		}
		if f.inject != nil {
			row.injectErr = f.inject()
		}
		row.dur, err = seg("during", slowDuring, base+1_000_000_000_000)
		if f.heal != nil {
			row.injectErr = errors.Join(row.injectErr, f.heal())
		}
		if err != nil {
			return err
		}
		if row.post, err = seg("post", slowPost, base+2_000_000_000_000); err != nil {
			return err
		}
		for j, w := range []benchkit.WrkResult{row.pre, row.dur, row.post} {
			row.acceptedPerSec3[j] = float64(w.Codes["200"]) / []time.Duration{slowPre, slowDuring, slowPost}[j].Seconds()
		}
		if row.drained, err = sys.waitDrained(5 * time.Minute); err != nil {
			return fmt.Errorf("-slow %s: %w", f.name, err)
		}
		rows = append(rows, row)
	}
	c := sys.check()
	text := renderSlow(rows, c, o)
	fmt.Print(text)
	if err := os.WriteFile(filepath.Join(out, "slow.md"), []byte(text), 0o644); err != nil {
		return err
	}
	if !c.OK {
		return errors.New("correctness check failed (see above)")
	}
	return nil
}

// stallRedis pauses the writes of the redis-server at addr stallPause out
// of every second until stop, then lifts the pause.
func stallRedis(addr string, stop <-chan struct{}) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if _, err := testenv.Command(addr, "CLIENT", "PAUSE", fmt.Sprint(stallPause.Milliseconds()), "WRITE"); err != nil {
			return err
		}
		select {
		case <-stop:
			_, err := testenv.Command(addr, "CLIENT", "UNPAUSE")
			return err
		case <-t.C:
		}
	}
}

// dsnHost is the host:port of a DSN's tcp(…).
func dsnHost(dsn string) (string, error) {
	_, rest, ok := strings.Cut(dsn, "tcp(")
	host, _, ok2 := strings.Cut(rest, ")")
	if !ok || !ok2 {
		return "", fmt.Errorf("DSN %q names no tcp(host:port)", dsn)
	}
	return host, nil
}

func renderSlow(rows []slowRow, c check, o options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Slow dependencies (go run ./bench/harness -slow)\n\n")
	fmt.Fprintf(&b, "%s\nParts as processes (seckill broker, edge with the engine in-process, consumer) on MariaDB; wrk -t%d -c%d, distinct buyers on the hot SKU %d; per fault %v before, %v with it, %v after. Ratios are to the first row, measured in the same run.\n\n",
		machine(), o.threads, o.conns, acceptSKU, slowPre, slowDuring, slowPost)
	b.WriteString("| fault | answers | 503 | 429 | p99 before | p99 during | p99 after | accepts/s before / during / after | during vs reference | after / before | drain after |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n")
	ref := rows[0].acceptedPerSec3[1]
	for _, r := range rows {
		vsRef := 0.0
		if ref > 0 {
			vsRef = r.acceptedPerSec3[1] / ref
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f%% | %.2f%% | %v | %v | %v | %.0f / %.0f / %.0f | %.2f× | %.2f× | %d in %v |\n",
			r.name, r.answers(), 100*r.share("503"), 100*r.share("429"),
			r.pre.P99.Round(time.Millisecond), r.dur.P99.Round(time.Millisecond), r.post.P99.Round(time.Millisecond),
			r.acceptedPerSec3[0], r.acceptedPerSec3[1], r.acceptedPerSec3[2], vsRef, r.recovery(),
			r.drained.Backlog, r.drained.Took.Round(100*time.Millisecond))
		if r.injectErr != nil {
			fmt.Fprintf(&b, "|  fault error: %v |||||||||||\n", r.injectErr)
		}
	}
	b.WriteString("\nFloor (the stall figures): 503 ≤ 5%, p99 during ≤ engine.occupy_timeout + 100 ms, after / before ≥ 0.80.\n\nCorrectness:\n\n")
	for _, l := range c.Lines {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}
