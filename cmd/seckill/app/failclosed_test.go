package app

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestRedisStoppedMidSaleAnswersBusyUntilItIsBack: fail closed on the plain
// order path. The whole system runs in one process, wired as `seckill dev`
// wires it (edge, in-process engine with group-commit occupy, consumer,
// jobs), and sells an activity without tokens to a steady crowd of new
// buyers. Redis is killed mid-sale: every purchase answered while it is
// down is 503 with code BUSY — never a ticket, never another refusal — and
// once it is back, with its data (append-only file, fsync always) or empty
// (the watcher rebuilds the SKU from the database), purchases are 200
// again. No 503 becomes an order. The one Redis call of a purchase is the
// engine's occupy, which also counts the user × SKU window
// (edge.rate.user_sku_limit, on in every shipped config) when it is on:
// with the window on or off it must fail closed, and the edge's own checks
// make no Redis call to fail.
func TestRedisStoppedMidSaleAnswersBusyUntilItIsBack(t *testing.T) {
	testenv.Long(t)
	withData := []string{"--appendonly", "yes", "--appendfsync", "always"}
	for _, c := range []struct {
		name   string
		args   []string
		keeps  bool // Redis comes back with everything it acknowledged
		window bool // the user × SKU window is on (counted by the occupy script)
	}{
		{"Redis comes back with its data, the window on", withData, true, true},
		{"Redis comes back with its data, the window off", withData, true, false},
		{"Redis comes back empty, the window on", nil, false, true},
		{"Redis comes back empty, the window off", nil, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, driver string) { testRedisStopped(t, driver, c.args, c.keeps, c.window) })
		})
	}
}

// The phases of the outage, as a buyer sees them when it sends and when it
// is answered.
const (
	beforeStop int32 = iota
	redisDown        // the server is dead (SIGKILL returned)
	restarting       // Start is running
	redisBack        // Start returned: the server answers again
)

type outageAnswer struct {
	sentIn, answeredIn int32
	sent               time.Time
	a                  ledgerAnswer
}

func testRedisStopped(t *testing.T, driver string, redisArgs []string, keeps, window bool) {
	const (
		stock   = 100_000 // never what limits a buyer here
		minDown = 20      // answers sent and received while Redis is down, at least
		minBack = 50      // answers sent after the first 200 since the restart
		buyers  = 4       // concurrent buyers, each a new user per attempt
	)
	r := testenv.StartRedis(t, testenv.WithRedisArgs(redisArgs...))
	// crowdBudgets: a healthy but slow Redis call on a loaded machine is
	// not mistaken for the outage (the grace must outlast the budgets).
	l := startLedgerSysOn(t, r, driver, func(c *config.Config) {
		crowdBudgets(c)
		c.Reconcile.OrphanGrace = 5 * time.Second
		if !window {
			c.Edge.Rate.UserSKULimit = 0
		}
	})
	l.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: stock, Price: 100, LimitPerUser: 1}))

	var (
		phase    atomic.Int32
		users    atomic.Int64
		stop     atomic.Bool
		firstOK  atomic.Int64 // when the first 200 sent after the restart was answered (unix ns)
		ok, down atomic.Int64 // 200s before the stop; answers sent and received while down
		afterOK  atomic.Int64 // answers sent after firstOK
		mu       sync.Mutex
		answers  []outageAnswer
		wg       sync.WaitGroup
	)
	for range buyers {
		wg.Go(func() {
			for !stop.Load() {
				sent, in := time.Now(), phase.Load()
				after := firstOK.Load() != 0
				a := l.buy(t, 1001, users.Add(1))
				got := phase.Load()
				switch {
				case in == beforeStop && got == beforeStop && a.Status == 200:
					ok.Add(1)
				case in == redisDown && got == redisDown:
					down.Add(1)
				case in == redisBack && a.Status == 200:
					firstOK.CompareAndSwap(0, time.Now().UnixNano())
				}
				if after {
					afterOK.Add(1)
				}
				mu.Lock()
				answers = append(answers, outageAnswer{in, got, sent, a})
				mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// Mid-sale: tickets are being issued and the consumer turns them into
	// orders.
	testenv.Eventually(t, "the sale to get going", 20*time.Second, func() bool {
		n, _, _ := l.sys.Store.CountOrders(context.Background(), 1, 1001)
		return ok.Load() >= 20 && n >= 5
	})
	r.Stop()
	phase.Store(redisDown)
	stopped := time.Now()
	testenv.Eventually(t, "answers while Redis is down (a request hangs instead of failing fast?)", 15*time.Second, func() bool {
		return down.Load() >= minDown && time.Since(stopped) >= time.Second
	})
	phase.Store(restarting)
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	phase.Store(redisBack)
	back := time.Now()
	testenv.Eventually(t, "a 200 after Redis came back", 20*time.Second, func() bool { return firstOK.Load() != 0 })
	t.Logf("first 200 %v after Redis came back", time.Duration(firstOK.Load()-back.UnixNano()))
	testenv.Eventually(t, "answers after the first 200", 20*time.Second, func() bool { return afterOK.Load() >= minBack })
	stop.Store(true)
	wg.Wait()

	// Each rule broken is reported once, with its count and a few examples.
	const (
		onlyDesigned = "only 200 or 503 BUSY may answer a buyer"
		busyWhenDown = "every answer while Redis is down is 503 BUSY"
		okWhenBack   = "every buyer sent after the first 200 since the restart gets 200"
	)
	broken, examples := map[string]int{}, map[string][]string{}
	breaks := func(rule string, x outageAnswer) {
		broken[rule]++
		if len(examples[rule]) < 3 {
			examples[rule] = append(examples[rule], fmt.Sprintf("%d %s sent %v after the stop (phase %d→%d)",
				x.a.Status, x.a.Code, x.sent.Sub(stopped).Round(time.Millisecond), x.sentIn, x.answeredIn))
		}
	}
	var queued, busyDown, busyBack int64
	first := time.Unix(0, firstOK.Load())
	for _, x := range answers {
		a := x.a
		busy := a.Status == 503 && a.Code == "BUSY"
		switch {
		case a.Status != 200 && !busy:
			breaks(onlyDesigned, x)
		case x.sentIn == redisDown && x.answeredIn == redisDown && !busy:
			breaks(busyWhenDown, x)
		case x.sentIn == redisBack && x.sent.After(first) && a.Status != 200:
			breaks(okWhenBack, x)
		}
		switch {
		case a.Status == 200:
			queued++
		case !busy:
		case x.sentIn == redisDown && x.answeredIn == redisDown:
			busyDown++
		case x.sentIn == redisBack:
			busyBack++
		}
	}
	for _, rule := range []string{onlyDesigned, busyWhenDown, okWhenBack} {
		if n := broken[rule]; n > 0 {
			t.Errorf("%s: broken by %d answers, e.g. %s", rule, n, strings.Join(examples[rule], "; "))
		}
	}
	t.Logf("%d answers: %d tickets; 503 BUSY: %d while down, %d after the restart before the first 200",
		len(answers), queued, busyDown, busyBack)
	if busyDown < minDown {
		t.Errorf("only %d answers of 503 BUSY while Redis was down", busyDown)
	}
	// The engine's one call answered them, never a check of the edge's.
	checkBusy := labeled(t, l.sys.Reg, "seckill_edge_rejections_total", "reason", "busy")
	engineBusy := labeled(t, l.sys.Reg, "seckill_edge_engine_calls_total", "outcome", "busy")
	t.Logf("503 BUSY from the edge's own checks %v, from the engine %v", checkBusy, engineBusy)
	if engineBusy < minDown || checkBusy != 0 {
		t.Errorf("the window on: %v; busy answers from the edge's checks %v, from the engine %v",
			window, checkBusy, engineBusy)
	}

	// The books: a 503 never becomes an order. With its data back every
	// ticket does; an empty Redis loses the occupancies of the tickets not
	// yet ordered when it died (their claim fails), by design.
	ctx := context.Background()
	if err := l.sys.drain(ctxTimeout(t, 30*time.Second)); err != nil {
		t.Fatalf("drain: %v", err)
	}
	orders, units, err := l.sys.Store.CountOrders(ctx, 1, 1001)
	if err != nil {
		t.Fatal(err)
	}
	if orders != units || orders > queued || keeps && orders != queued {
		t.Errorf("%d orders (%d units) for %d tickets issued (Redis kept its data: %v)", orders, units, queued, keeps)
	}
}

// labeled is the value of the counter name{label="value"}.
func labeled(t *testing.T, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}
