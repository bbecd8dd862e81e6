package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"seckill/admin"
	"seckill/bench/benchkit"
	"seckill/internal/testenv"
	"seckill/sale"
)

const adminToken = "bench-scaling-admin-token-0123456789abcdef"

// The activity of the edge run: SKU 3001 with stock no run exhausts (the
// accept path), SKU 3002 with one unit, bought once, then the reject path
// (sold out, answered from the edge's local flag).
const (
	edgeActivity = 3
	acceptSKU    = 3001
	soldOutSKU   = 3002
)

// measureEdgeAndConsumer is the edge's ceilings and, with o.runs
// ("consumer"), the consumer's: one redis-server, `seckill broker`,
// MariaDB, and `seckill edge` (engine in process) with GOMAXPROCS=1, so one
// core is its budget; wrk from bench/accept.lua (distinct buyers) on the
// sold-out SKU (reject/s) and on the SKU with stock (accept/s), each per
// second of the edge's CPU. The accepted tickets wait in the broker; then
// `seckill consumer` with GOMAXPROCS=1 turns them into orders, timed from
// its first order to its last, per second of its CPU.
func measureEdgeAndConsumer(o options, dsnBase string) ([]figure, error) {
	dbName := "seckill_scaling"
	if _, err := testenv.MySQLDatabase(dsnBase, dbName); err != nil {
		return nil, err
	}
	dir := filepath.Join(o.out, "edge-run")
	redis, redisAddr, err := benchkit.StartRedis(o.out, "edge-redis", filepath.Join(dir, "redis"))
	if err != nil {
		return nil, err
	}
	defer redis.StopWithin(10 * time.Second)
	brokerAddr := benchkit.FreeAddr()
	broker, err := benchkit.Start(o.out, "edge-broker", o.bin, nil, "broker", "--listen", brokerAddr,
		"--data-dir", filepath.Join(dir, "broker"), "--partitions", strconv.Itoa(o.partitions))
	if err != nil {
		return nil, err
	}
	defer broker.StopWithin(10 * time.Second)
	if err := benchkit.WaitPort(broker, brokerAddr, 20*time.Second); err != nil {
		return nil, err
	}
	env := []string{
		"SECKILL_REDIS_DEFAULT_ADDRS=" + redisAddr,
		"SECKILL_ENGINE_KAFKA_BROKERS=" + brokerAddr,
		"SECKILL_CONSUMER_BROKERS=" + brokerAddr,
		"SECKILL_STORE_DRIVER=mysql",
		"SECKILL_STORE_DSN=" + dsnBase + dbName + "?parseTime=true",
		"SECKILL_ADMIN_TOKEN=" + adminToken,
		// Production processes refuse bench.yaml's public dev secrets.
		"SECKILL_TOKEN_KEYS=scaling1:bench-scaling-token-key-0123456789abcdef",
		"SECKILL_PAYMENT_PROVIDER_KEY=bench-scaling-payment-key-0123456789abcdef",
		"SECKILL_ORDER_SIGNING_KEYS=scaling1:bench-scaling-order-signing-key-0123456789",
		// The bookkeeping jobs stay off: the CPU measured is the path's.
		"SECKILL_RECONCILE_JOBS=false",
		// One core per part.
		"GOMAXPROCS=1",
	}
	edgeAddr, adminAddr := benchkit.FreeAddr(), benchkit.FreeAddr()
	edgeArgs := []string{"edge", "--config", o.config, "--listen", edgeAddr, "--admin-listen", adminAddr}
	edge, err := benchkit.Start(o.out, "edge", o.bin, env, edgeArgs...)
	if err != nil {
		return nil, err
	}
	defer edge.StopWithin(40 * time.Second)
	if err := benchkit.WaitReady(edge, "http://"+adminAddr+"/readyz", 60*time.Second); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	api := benchkit.Admin{Addr: adminAddr, Token: adminToken, HTTP: hc}
	orderURL := "http://" + edgeAddr + "/api/v1/flash-sale/order"
	if err := preheat(api, hc, orderURL); err != nil {
		return nil, err
	}
	edgeCmd := "GOMAXPROCS=1 seckill " + strings.Join(edgeArgs, " ")
	script := filepath.Join(o.root, "bench", "accept.lua")
	load := func(sku int64, base string) benchkit.Load {
		return benchkit.Load{Threads: o.threads, Conns: o.conns, Dur: o.dur, Timeout: 5 * time.Second, Script: script, URL: orderURL,
			Args: []string{strconv.FormatInt(sku, 10), base}}
	}
	var figs []figure
	for _, run := range []struct {
		name, what string
		sku        int64
		base, code string
	}{
		{"edge-reject", "reject/s (sold out)", soldOutSKU, "10000000000", "410"},
		{"edge-accept", "accept/s (engine in process)", acceptSKU, "20000000000", "200"},
	} {
		logf("%s: wrk -c%d %v against %s", run.name, o.conns, o.dur, edgeCmd)
		w, err := startCPU(edge.PID())
		if err != nil {
			return figs, err
		}
		res, err := benchkit.RunWrk(o.out, run.name, load(run.sku, run.base))
		if err != nil {
			return figs, err
		}
		cpu, wall, err := w.stop()
		if err != nil {
			return figs, err
		}
		n := res.Codes[run.code]
		if n == 0 || float64(n) < 0.9*float64(res.Requests) {
			return figs, fmt.Errorf("%s: %d answers %s of %d (%s): not the path meant", run.name, n, run.code, res.Requests, res.CodesString())
		}
		logf("%s: %s, edge CPU %v over %v", run.name, res.CodesString(), cpu, wall.Round(time.Millisecond))
		wrkCmd, _, _ := strings.Cut(res.Raw, "\n")
		figs = append(figs, figure{part: "edge", what: run.what, ceiling: perCore(n, cpu), seen: res.RPS,
			note: fmt.Sprintf("%s answers %s; edge CPU %.2f cores%s, p99 %v", strconv.FormatInt(n, 10), run.code, cpu.Seconds()/wall.Seconds(), notBound(cpu, wall), res.P99),
			cmd:  wrkCmd + "  against  " + edgeCmd})
	}
	if !o.runs("consumer") {
		return figs, nil
	}
	f, err := measureConsumer(o, env, api)
	if err != nil {
		return figs, fmt.Errorf("consumer: %w", err)
	}
	return append(figs, f), nil
}

// preheat creates the edge run's activity and buys the sold-out SKU's one
// unit as soon as the edge sells it.
func preheat(api benchkit.Admin, hc *http.Client, orderURL string) error {
	now := time.Now()
	a := sale.Activity{ID: edgeActivity, Start: now.Add(-time.Second).Truncate(time.Second), End: now.Add(3 * time.Hour).Truncate(time.Second),
		State: sale.StateOnline, SKUs: []sale.SKU{
			{ID: acceptSKU, Stock: 50_000_000, Price: 9900, LimitPerUser: 1},
			{ID: soldOutSKU, Stock: 1, Price: 9900, LimitPerUser: 1},
		}}
	if err := api.Call("POST", "/admin/v1/activities", a, nil); err != nil {
		return fmt.Errorf("create activity %d: %w", edgeActivity, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, err := benchkit.Buy(hc, orderURL, soldOutSKU, 1)
		if err == nil && code == http.StatusOK {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge does not sell SKU %d (last answer %d, %v)", soldOutSKU, code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// measureConsumer starts `seckill consumer` (GOMAXPROCS=1) on the edge
// run's backlog and times it from its first order to the last ticket's.
func measureConsumer(o options, env []string, api benchkit.Admin) (figure, error) {
	stockOf := func() (orders, occupied int64, err error) {
		var rep admin.StockReport
		if err := api.Call("GET", "/admin/v1/activities/"+strconv.Itoa(edgeActivity)+"/stock", nil, &rep); err != nil {
			return 0, 0, err
		}
		for _, k := range rep.SKUs {
			orders += k.Orders
			occupied += k.Occupied
		}
		return orders, occupied, nil
	}
	_, backlog, err := stockOf()
	if err != nil {
		return figure{}, err
	}
	args := []string{"consumer", "--config", o.config}
	logf("consumer: %d tickets waiting; GOMAXPROCS=1 seckill %s", backlog, strings.Join(args, " "))
	cons, err := benchkit.Start(o.out, "consumer", o.bin, env, args...)
	if err != nil {
		return figure{}, err
	}
	defer cons.StopWithin(40 * time.Second)
	// The CPU counts from the start (its start-up and group join are a
	// small part of a real backlog's drain); the wall time from its first
	// order.
	w, err := startCPU(cons.PID())
	if err != nil {
		return figure{}, err
	}
	orders0, _, err := stockOf()
	if err != nil {
		return figure{}, err
	}
	timeout := time.Now().Add(max(20*o.dur, 2*time.Minute))
	var first time.Time
	for {
		if !cons.Running() {
			return figure{}, fmt.Errorf("seckill consumer exited (see %s)", cons.Log)
		}
		orders, occupied, err := stockOf()
		if err != nil {
			return figure{}, err
		}
		if first.IsZero() && orders > orders0 {
			first = time.Now()
		}
		if orders > orders0 && occupied == 0 {
			cpu, _, err := w.stop()
			if err != nil {
				return figure{}, err
			}
			n, wall := orders-orders0, time.Since(first)
			logf("consumer: %d orders in %v, consumer CPU %v", n, wall.Round(time.Millisecond), cpu)
			return figure{part: "consumer", what: "orders/s (MariaDB)", ceiling: perCore(n, cpu), seen: float64(n) / max(wall.Seconds(), 0.05),
				note: fmt.Sprintf("%d orders drained from a backlog of %d; consumer CPU %v", n, backlog, cpu.Round(time.Millisecond)),
				cmd:  "GOMAXPROCS=1 seckill " + strings.Join(args, " ") + "  on the edge run's backlog (go run ./bench/scaling -only edge,consumer)"}, nil
		}
		if time.Now().After(timeout) {
			return figure{}, fmt.Errorf("%d tickets still without an order (see %s)", occupied, cons.Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
