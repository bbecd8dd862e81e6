package chaos

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"syscall"
	"testing"
	"time"

	"seckill/internal/sale"
)

// scenario is one fault test: a system, a crowd, a fault, the check, and a
// line in the table whatever happens.
type scenario struct {
	t   *testing.T
	s   *System
	run *Run
	rep *report
	// stock per SKU as created
	skus map[int64]int64
}

func newScenario(t *testing.T, o Options) *scenario {
	sc := &scenario{t: t}
	// Registered first, so it runs last: after the test body, whatever
	// it did.
	t.Cleanup(func() {
		run, rep := sc.run, sc.rep
		if run == nil {
			run = &Run{Tickets: map[string]ticket{}}
		}
		if rep == nil {
			rep = &report{Stock: map[int64]int64{}}
			rep.add("scenario ran to its check", false, "stopped before the invariant check")
		}
		record(t, run, rep)
	})
	sc.s = startSystem(t, o)
	return sc
}

// crowd is the standard load: the full crowd under make chaos, a smaller
// one in make test (where the test binary runs with -race).
func crowd() (LoadSpec, map[int64]int64) {
	if chaosMode() {
		return LoadSpec{Users: 3000, Repeats: 600, HotFrac: 0.75, Rate: 300, Workers: 48, Seed: 1},
			map[int64]int64{skuNormal: 300, skuHot: 1500}
	}
	return LoadSpec{Users: 1200, Repeats: 200, HotFrac: 0.75, Rate: 250, Workers: 32, Seed: 1},
		map[int64]int64{skuNormal: 120, skuHot: 600}
}

func (sc *scenario) open(skus map[int64]int64) {
	sc.skus = skus
	sc.s.preheat(saleActivity(skus[skuNormal], skus[skuHot]))
}

// withFault runs the standard crowd on the standard stock with one fault,
// then waits for quiescence and checks the invariants.
func (sc *scenario) withFault(f faultPlan) {
	sc.t.Helper()
	load, skus := crowd()
	sc.open(skus)
	run, _ := sc.s.buyWithFault(load, f)
	sc.finish(run)
}

// finish waits for quiescence and checks the invariants.
func (sc *scenario) finish(run *Run) {
	sc.t.Helper()
	sc.run = run
	sc.t.Logf("crowd: %d sent, %d accepted in %v: %s", run.sent(), run.accepted(), run.Took.Round(time.Millisecond), run.summary())
	sc.s.quiesce(run, 90*time.Second)
	sc.rep = sc.s.checkInvariants(run, sc.skus)
}

// ---- fault scenarios ----

// TestRedisKilledWithPersistence: both redis-servers (default and hot
// shard) are SIGKILLed mid-sale and started again on their append-only
// files (appendfsync everysec, as in docker-compose.yml).
func TestRedisKilledWithPersistence(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{RedisPersist: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL both redis-servers (AOF everysec)", At: 3 * time.Second,
		Inject: func() error { s.Redis.Stop(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal:   func() error { return firstErr(s.Redis.Start(), s.Hot.Start()) },
	})
}

// TestRedisKilledWithoutPersistence: both redis-servers are SIGKILLed
// mid-sale and come back empty. The engine must refuse (the activity is
// gone) or rebuild from the database, never resell. Three seconds after the
// restart, buyers who already hold orders try again: whatever the system
// answers, no second order may come of it. If it still refuses to sell
// then, on-call creates the activity again as the runbook says (Preheat
// rebuilds stock from the database); if it rebuilt on its own, nobody acts.
func TestRedisKilledWithoutPersistence(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{RedisPersist: false})
	load, skus := crowd()
	sc.open(skus)
	s := sc.s
	var probe *Run
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "SIGKILL both redis-servers (no persistence: they restart empty)", At: 3 * time.Second,
		Inject: func() error { s.Redis.Stop(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal: func() error {
			if err := firstErr(s.Redis.Start(), s.Hot.Start()); err != nil {
				return err
			}
			time.Sleep(3 * time.Second)
			// Users 1..200 are the crowd's first buyers (same seed: same
			// SKUs); most hold orders by now.
			probe = s.buy(context.Background(), LoadSpec{Users: 200, HotFrac: load.HotFrac, Rate: 400, Workers: 16, Seed: load.Seed})
			refused := probe.Statuses["404 UNKNOWN_SKU"] + probe.Statuses["425 NOT_OPEN"] + probe.Statuses["503 BUSY"]
			s.t.Logf("3s after Redis came back empty, repeat buyers got: %s", probe.summary())
			if refused < probe.sent() {
				s.t.Log("the system sells again on its own (rebuilt from the database): on-call does nothing")
				return nil
			}
			s.t.Log("the system refuses to sell: on-call creates the activity again (Preheat rebuilds stock from the database)")
			return s.adminJSON("POST", "/admin/v1/activities", saleActivity(skus[skuNormal], skus[skuHot]), nil)
		},
	})
	if probe != nil {
		run.Attempts = append(run.Attempts, probe.Attempts...)
		for rn, tk := range probe.Tickets {
			run.Tickets[rn] = tk
		}
	}
	sc.finish(run)
}

// TestBrokerKilled: the broker process is SIGKILLed while the engine
// produces, and started again three seconds later on its data directory.
func TestBrokerKilled(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL the broker", At: 3 * time.Second,
		Inject: func() error { s.Broker.kill(syscall.SIGKILL); return nil },
		HealAt: 6 * time.Second,
		Heal:   func() error { return s.restart(s.Broker, s.waitBroker) },
	})
}

// TestConsumerKilled: the consumer is SIGKILLed while it drains a backlog
// (a batch in hand: claimed, maybe written, not committed) and started
// again, twice in make test and three times under make chaos; the
// redelivered messages must change nothing. Fast: runs in make test.
//
// Each restart follows the kill at once. The consumer is a static member
// of its group (consumer.instance_id): the restarted process takes its
// dead former self's place and partitions without a rebalance. (Before
// static membership, a dynamic member restarted at once could sit in
// kfake's JoinGroup, waiting for the dead member, for up to a minute.)
func TestConsumerKilled(t *testing.T) {
	sc := newScenario(t, Options{})
	load, skus := crowd()
	kills := 2
	if chaosMode() {
		kills = 3
	}
	sc.open(skus)
	s := sc.s
	done := 0
	run, _ := s.buyWithFault(load, faultPlan{
		Name: fmt.Sprintf("SIGKILL the consumer ×%d mid-drain, restarting it each time", kills), At: 1500 * time.Millisecond,
		Inject: func() error {
			for i := 0; i < kills; i++ {
				if i > 0 {
					// Kill it while it works through the backlog.
					s.waitDraining(15 * time.Second)
				}
				// Messages the group has not committed: fetched, in a
				// batch, or not yet fetched. The kill drops what it holds.
				n, err := s.lag()
				s.t.Logf("kill %d: consumer group lag %d (%v)", i+1, n, err)
				s.Consumer.kill(syscall.SIGKILL)
				done++
				if err := s.restart(s.Consumer, nil); err != nil {
					return err
				}
			}
			return nil
		},
	})
	if done != kills {
		t.Errorf("%d kills, want %d", done, kills)
	}
	sc.finish(run)
}

// waitDraining waits until the consumer group's lag shrinks (the consumer
// is working through a backlog), at most d.
func (s *System) waitDraining(d time.Duration) {
	first, err := s.lag()
	deadline := time.Now().Add(d)
	for err == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		n, err2 := s.lag()
		if err2 == nil && n < first {
			s.t.Logf("consumer draining: lag %d -> %d", first, n)
			return
		}
		if err2 == nil && n > first {
			first = n
		}
	}
	s.t.Logf("consumer not seen draining within %v (lag %d, %v)", d, first, err)
}

// TestDatabaseUnreachable: MariaDB is cut off from every process for 10s
// (a partition: queries hang until their timeouts) while buyers keep
// buying and messages keep arriving.
func TestDatabaseUnreachable(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{DBProxy: true})
	load, skus := crowd()
	load.Users, load.Rate = 4000, 260 // long enough to span the outage
	sc.open(skus)
	s := sc.s
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "cut MariaDB off for 10s", At: 2 * time.Second,
		Inject: func() error { s.proxy.partition(); return nil },
		HealAt: 12 * time.Second,
		Heal: func() error {
			// Tickets kept coming and piled up in Kafka meanwhile.
			n, err := s.lag()
			s.t.Logf("consumer lag after 10s without a database: %d (%v)", n, err)
			s.proxy.healNow()
			if err == nil && n == 0 {
				return fmt.Errorf("no messages waited for the database: the outage did not meet arriving messages")
			}
			return err
		},
	})
	sc.finish(run)
}

// TestEdgeRestarted: the edge (in-process engine) is stopped with SIGTERM
// under load — it drains and flushes its producer — and started again.
func TestEdgeRestarted(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGTERM the edge and start it again", At: 3 * time.Second,
		Inject: func() error { s.Edge.kill(syscall.SIGTERM); return s.lastExit(s.Edge) },
		HealAt: 3 * time.Second,
		Heal:   func() error { return s.restart(s.Edge, s.waitEdge) },
	})
}

// TestEdgeKilled: the edge with its in-process engine is SIGKILLed under
// load — occupancies it took may never reach Kafka (the orphan sweeper must
// give them back) and tickets Kafka acked may never be answered — and
// started again.
func TestEdgeKilled(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL the edge (in-process engine) and start it again", At: 3 * time.Second,
		Inject: func() error { s.Edge.kill(syscall.SIGKILL); return nil },
		HealAt: 4 * time.Second,
		Heal:   func() error { return s.restart(s.Edge, s.waitEdge) },
	})
}

// TestEngineSidecarKilled: the engine sidecar is SIGKILLed mid-sale and
// started again; the edge's circuit breaker answers busy meanwhile.
func TestEngineSidecarKilled(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{Sidecar: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL the engine sidecar", At: 3 * time.Second,
		Inject: func() error { s.Engine.kill(syscall.SIGKILL); return nil },
		HealAt: 5500 * time.Millisecond,
		Heal:   func() error { return s.restart(s.Engine, s.waitEngine) },
	})
}

// TestSidecarSale is the plain sale through the engine sidecar, no fault:
// the baseline the sidecar fault scenario builds on. Fast.
func TestSidecarSale(t *testing.T) {
	sc := newScenario(t, Options{Sidecar: true})
	load, skus := crowd()
	load.Users, load.Repeats = load.Users/2, load.Repeats/2
	sc.open(skus)
	run := sc.s.buy(context.Background(), load)
	sc.s.expect("the sidecar engine sells an activity created after it started", run.accepted() > 0,
		"%d accepted: %s", run.accepted(), run.summary())
	sc.finish(run)
}

// TestReplayFromZero: after a sale, the whole orders topic is consumed again
// from offset 0 by a fresh consumer group; orders, results and stock must
// not change at all.
func TestReplayFromZero(t *testing.T) {
	long(t)
	sc := newScenario(t, Options{})
	load, skus := crowd()
	sc.open(skus)
	s := sc.s
	run := s.buy(context.Background(), load)
	sc.run = run
	s.quiesce(run, 60*time.Second)
	before := s.fingerprint(run, skus)
	replay := s.newConsumer("consumer-replay", "seckill-replay")
	if err := s.restart(replay, nil); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.quiesceGroup("seckill-replay", 90*time.Second); err != nil {
		t.Error(err)
	}
	t.Logf("replay group drained %d+ messages in %v", run.accepted(), time.Since(start).Round(time.Millisecond))
	replay.kill(syscall.SIGTERM)
	after := s.fingerprint(run, skus)
	for _, d := range before.diff(after) {
		t.Errorf("replay changed the books: %s", d)
	}
	sc.finish(run)
}

// TestWindowEdges: requests just before the start and just after the end of
// a sale, judged by the server's clock (Redis TIME): nothing before the
// start and nothing at or after the end is accepted. Fast.
func TestWindowEdges(t *testing.T) {
	sc := newScenario(t, Options{NoConsumer: false})
	s := sc.s
	now := s.serverTime()
	// Whole milliseconds: the occupy script compares milliseconds.
	start := now.Add(3 * time.Second).Truncate(time.Millisecond)
	end := start.Add(3 * time.Second)
	a := sale.Activity{ID: activityID, Start: start, End: end, State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: skuNormal, Stock: 1000, Price: 990, LimitPerUser: 1}, {ID: skuHot, Stock: 10, Price: 990, LimitPerUser: 1, Hot: true}}}
	sc.skus = map[int64]int64{skuNormal: 1000, skuHot: 10}
	if err := s.adminJSON("POST", "/admin/v1/activities", a, nil); err != nil {
		t.Fatal(err)
	}
	// The harness' clock against Redis TIME (same host, but measure): the
	// midpoint of the quickest of several round trips. Reading TIME and
	// then the local clock, as once here, put the local reading late by
	// the whole way back (under load tens of milliseconds, past the
	// slack), so requests answered at the end looked answered before it.
	offset := s.serverOffset()
	server := func(t time.Time) time.Time { return t.Add(offset) }

	run := &Run{Tickets: map[string]ticket{}, Statuses: map[string]int{}}
	user := int64(1)
	// probe sends one request every step across edge ± span, as users
	// 1, 2, ...; each records when it was sent and answered (server time).
	probe := func(edge time.Time, span, step time.Duration) []attempt {
		var out []attempt
		done := make(chan attempt)
		n := 0
		for at := edge.Add(-span); !at.After(edge.Add(span)); at = at.Add(step) {
			time.Sleep(time.Until(at.Add(-offset)))
			a := attempt{User: user, SKU: skuNormal}
			user++
			n++
			go func() { s.attempt(&a); done <- a }()
		}
		for i := 0; i < n; i++ {
			out = append(out, <-done)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Sent.Before(out[j].Sent) })
		return out
	}
	const slack = 20 * time.Millisecond // clock reading error on one host
	judge := func(edge time.Time, as []attempt, beforeCode string, beforeStatus int, afterCode string, afterStatus int) {
		var before, after, straddle int
		for _, a := range as {
			sent, answered := server(a.Sent), server(a.Sent.Add(a.Took))
			run.Attempts = append(run.Attempts, a)
			key := fmt.Sprintf("%d %s", a.Status, a.Code)
			run.Statuses[key]++
			if a.Status == 200 {
				run.Tickets[a.RequestNo] = ticket{RequestNo: a.RequestNo, User: a.User, SKU: a.SKU}
			}
			switch {
			case answered.Before(edge.Add(-slack)):
				before++
				if a.Status != beforeStatus || a.Code != beforeCode {
					t.Errorf("sent %v before the edge %v (answered %v before): %d %s, want %d %s",
						edge.Sub(sent), edge.Format("15:04:05.000"), edge.Sub(answered), a.Status, a.Code, beforeStatus, beforeCode)
				}
			case sent.After(edge.Add(slack)):
				after++
				if a.Status != afterStatus || a.Code != afterCode {
					t.Errorf("sent %v after the edge %v: %d %s, want %d %s",
						sent.Sub(edge), edge.Format("15:04:05.000"), a.Status, a.Code, afterStatus, afterCode)
				}
			default:
				straddle++
				if a.Status != beforeStatus && a.Status != afterStatus {
					t.Errorf("at the edge %v: %d %s", edge.Format("15:04:05.000"), a.Status, a.Code)
				}
			}
		}
		t.Logf("edge %s: %d requests answered before it, %d sent after it, %d in flight across it",
			edge.Format("15:04:05.000"), before, after, straddle)
		if before < 5 || after < 5 {
			t.Errorf("too few requests on each side of the edge (%d before, %d after): the probe did not straddle it", before, after)
		}
	}
	judge(start, probe(start, 400*time.Millisecond, 20*time.Millisecond), "NOT_OPEN", 425, "QUEUING", 200)
	judge(end, probe(end, 400*time.Millisecond, 20*time.Millisecond), "QUEUING", 200, "ENDED", 410)

	// Every order belongs to a ticket accepted inside the window.
	sc.finish(run)
	rows, err := s.db.Query(`SELECT request_no FROM seckill_order WHERE activity_id = ?`, activityID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var rn string
		if err := rows.Scan(&rn); err != nil {
			t.Fatal(err)
		}
		if _, ok := run.Tickets[rn]; !ok {
			t.Errorf("order for request %s, which was not accepted inside the window", rn)
		}
	}
}

// ---- helpers ----

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// lastExit reports an unclean exit of a gently stopped process.
func (s *System) lastExit(p *proc) error {
	if err := p.lastErr(); err != nil {
		return fmt.Errorf("%s exited with %v after SIGTERM:\n%s", p.name, err, p.tail(20))
	}
	return nil
}

// fingerprint is everything a replay must leave as it was.
type fingerprint struct {
	Orders  map[string]string // requestNo -> orderNo status user
	Results map[string]string // requestNo -> state orderNo code
	Redis   map[int64]string  // sku -> stock sold users claimed
}

func (s *System) fingerprint(run *Run, skus map[int64]int64) fingerprint {
	s.t.Helper()
	b, err := s.readBooks(run, skus)
	if err != nil {
		s.t.Fatal(err)
	}
	f := fingerprint{Orders: map[string]string{}, Results: map[string]string{}, Redis: map[int64]string{}}
	for id, sb := range b.SKUs {
		for _, o := range sb.Orders {
			f.Orders[o.RequestNo] = fmt.Sprintf("%s %s user %d", o.OrderNo, o.Status, o.User)
		}
		f.Redis[id] = fmt.Sprintf("stock %d sold %d users %d claimed %d", sb.Stock, sb.Sold, len(sb.Users), len(sb.Claimed))
	}
	for rn, r := range b.Results {
		f.Results[rn] = fmt.Sprintf("%s %s %s", r[sale.FieldState], r[sale.FieldOrderNo], r[sale.FieldCode])
	}
	return f
}

func (f fingerprint) diff(g fingerprint) []string {
	var out []string
	cmp := func(what string, a, b map[string]string) {
		for k, v := range a {
			if b[k] != v {
				out = append(out, fmt.Sprintf("%s %s: %q became %q", what, k, v, b[k]))
			}
		}
		for k, v := range b {
			if _, ok := a[k]; !ok {
				out = append(out, fmt.Sprintf("%s %s: new %q", what, k, v))
			}
		}
	}
	cmp("order", f.Orders, g.Orders)
	cmp("result", f.Results, g.Results)
	if !reflect.DeepEqual(f.Redis, g.Redis) {
		out = append(out, fmt.Sprintf("redis %v became %v", f.Redis, g.Redis))
	}
	return head(out, 10)
}
