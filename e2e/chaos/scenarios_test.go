package chaos

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"syscall"
	"testing"
	"time"
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
	sc := beginScenario(t)
	sc.s = startSystem(t, o)
	return sc
}

// beginScenario registers the scenario's line in the table, written
// whatever happens; the caller starts its system.
func beginScenario(t *testing.T) *scenario {
	sc := &scenario{t: t}
	start := time.Now()
	// Registered first, so it runs last: after the test body, whatever
	// it did, and after the processes stopped.
	t.Cleanup(func() {
		run, rep := sc.run, sc.rep
		if run == nil {
			run = &Run{}
		}
		if rep == nil {
			rep = &report{Stock: map[int64]int64{}}
			rep.add("scenario ran to its check", false, "stopped before the invariant check")
		}
		record(t, run, rep, time.Since(start))
	})
	return sc
}

// crowd is the standard load: 1,700 distinct buyers plus 250 repeats,
// three in four on the hot SKU, paced at 120 requests/s (16 s: a fault
// injected at 3 s and healed by 6 s leaves the crowd buying for several
// seconds after it settled, with stock left) on 250 + 1,000 units. Every
// process runs under the race detector on two shared cores: the pace is
// what they carry with room to spare.
func crowd() (LoadSpec, map[int64]int64) {
	return LoadSpec{Users: 1700, Repeats: 250, HotFrac: 0.75, Rate: 120, Workers: 32, Seed: 1},
		map[int64]int64{skuNormal: 250, skuHot: 1000}
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
	sc.s.quiesce(run, sc.skus, 90*time.Second)
	sc.rep = sc.s.checkInvariants(run, sc.skus)
}

// busy is a healthy sale plus 503 BUSY: a dependency on the buyer's path
// is away and the edge fails closed.
var busy = healthy.with("503 BUSY")

// ---- fault scenarios ----

// TestRedisKilledWithPersistence: both redis-servers (default and hot
// shard) are SIGKILLed mid-sale and started again on their append-only
// files (appendfsync everysec, as in docker-compose.yml). A SIGKILL loses
// nothing the server wrote to its file, so no Redis loss is declared: every
// ticket the broker acknowledged must become an order. Buyers get 503 BUSY
// while Redis is away, never a guess.
func TestRedisKilledWithPersistence(t *testing.T) {
	sc := newScenario(t, Options{RedisPersist: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL both redis-servers (AOF everysec)", At: 3 * time.Second,
		Inject: func() error { s.Redis.Stop(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal:   func() error { return firstErr(s.Redis.Start(), s.Hot.Start()) },
		During: busy, Settle: 2 * time.Second,
	})
}

// TestRedisKilledWithoutPersistence: both redis-servers are SIGKILLed
// mid-sale and come back empty: a declared loss of both ledgers, with
// their tickets' results. The system answers 503 BUSY until the watcher has rebuilt every
// SKU from the database (README "Reconciliation"), then sells again on its
// own. Once it settled, buyers who already hold orders try again: whatever
// the system answers, no second order may come of it. Acknowledged tickets
// the loss failed must say so in their story.
func TestRedisKilledWithoutPersistence(t *testing.T) {
	sc := newScenario(t, Options{RedisPersist: false})
	load, skus := crowd()
	sc.open(skus)
	s := sc.s
	const settle = 4 * time.Second
	probed := make(chan *Run, 1)
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "SIGKILL both redis-servers (no persistence: they restart empty)", At: 3 * time.Second,
		Inject: func() error { s.Redis.Stop(); s.Hot.Stop(); return nil },
		HealAt: 5 * time.Second,
		Heal: func() error {
			err := firstErr(s.Redis.Start(), s.Hot.Start())
			go func() {
				// Users 1..200 are the crowd's first buyers (same seed:
				// same SKUs); most hold orders by now.
				time.Sleep(settle)
				probe := s.buy(context.Background(), LoadSpec{Users: 200, HotFrac: load.HotFrac, Rate: 100, Workers: 16, Seed: load.Seed})
				s.t.Logf("%v after Redis came back empty, repeat buyers got: %s", settle, probe.summary())
				probed <- probe
			}()
			return err
		},
		During: busy, Settle: settle,
		Loss: &redisLoss{SKUs: []int64{skuNormal, skuHot}},
	})
	run.add((<-probed).Attempts...)
	sc.finish(run)
}

// TestBrokerKilled: the broker process is SIGKILLed while the engine
// produces, and started again two seconds later on its data directory.
// Purchases meanwhile are 503 BUSY (the send fails, the occupancy is
// released); no message the broker acknowledged may be lost: every
// accepted ticket becomes an order.
//
// 503 BUSY may go on for up to 10s after the broker is back: Sarama's
// producer opens a circuit breaker per partition after three failed sends
// (breaker.New(3, 1, 10*time.Second) in its async_producer.go) and fails
// every send to that partition until it closes (seen: the last 503 sent
// 7.7-8.8s after the restart). The crowd runs on (22s) and the hot SKU has
// more stock, so that sales after that are seen.
func TestBrokerKilled(t *testing.T) {
	sc := newScenario(t, Options{})
	load, skus := crowd()
	load.Users, load.Repeats = 2300, 340
	skus[skuHot] = 1500
	sc.open(skus)
	s := sc.s
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "SIGKILL the broker", At: 3 * time.Second,
		Inject: func() error { s.Broker.kill(syscall.SIGKILL); return nil },
		HealAt: 5 * time.Second,
		Heal:   func() error { return s.restart(s.Broker, s.waitBroker) },
		During: busy, Settle: 11 * time.Second,
	})
	sc.finish(run)
}

// TestConsumerKilled: the consumer is SIGKILLed three times while it
// drains a backlog (a batch in hand: claimed, maybe written, not
// committed) and started again each time; the redelivered messages must
// change nothing, and buyers must not notice (the consumer is not on their
// path).
//
// Each restart follows the kill at once. The consumer is a static member
// of its group (consumer.instance_id): the restarted process takes its
// dead former self's place and partitions without a rebalance. (Before
// static membership, a dynamic member restarted at once could sit in
// kfake's JoinGroup, waiting for the dead member, for up to a minute.)
func TestConsumerKilled(t *testing.T) {
	sc := newScenario(t, Options{})
	const kills = 3
	s := sc.s
	done := 0
	sc.withFault(faultPlan{
		Name: fmt.Sprintf("SIGKILL the consumer ×%d mid-drain, restarting it each time", kills), At: 1500 * time.Millisecond,
		Inject: func() error {
			for i := 0; i < kills; i++ {
				if i > 0 {
					// Kill it while it works through the backlog.
					s.waitDraining(5 * time.Second)
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
		During: healthy,
	})
	if done != kills {
		t.Errorf("%d kills, want %d", done, kills)
	}
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

// TestDatabaseUnreachable: MariaDB is cut off from every process for 6s —
// longer than consumer.timeout (5s), so batches time out — (a partition:
// queries hang until their timeouts) while buyers keep buying and messages
// keep arriving. The database is not on the buyer's path: buyers get healthy
// answers — or 429 BACKLOG, should the backlog left behind drain slowly
// for a moment — and every ticket becomes an order once it is back.
func TestDatabaseUnreachable(t *testing.T) {
	sc := newScenario(t, Options{DBProxy: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "cut MariaDB off for 6s", At: 2 * time.Second,
		Inject: func() error { s.proxy.Partition(); return nil },
		HealAt: 8 * time.Second,
		Heal: func() error {
			// Tickets kept coming and piled up in Kafka meanwhile.
			n, err := s.lag()
			s.t.Logf("consumer lag after 6s without a database: %d (%v)", n, err)
			s.proxy.Heal()
			if err == nil && n == 0 {
				return fmt.Errorf("no messages waited for the database: the outage did not meet arriving messages")
			}
			return err
		},
		// The backlog's drain time may pass consumer.lag_high while the
		// consumer comes back (its timed-out batches retried): the edge
		// then sheds with 429 BACKLOG for a moment (edge/backlog.go).
		During: healthy.with("429 BACKLOG"), Settle: 4 * time.Second,
	})
}

// TestEdgeRestarted: the edge (in-process engine) is stopped with SIGTERM
// under load — it drains and flushes its producer — and started again.
// Buyers meanwhile find the port closed (a transport error) or, while the
// new edge waits for its servers (its listeners open first), 503 BUSY —
// never a wrong answer — and every ticket it answered becomes an order.
func TestEdgeRestarted(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGTERM the edge and start it again", At: 3 * time.Second,
		Inject: func() error { s.Edge.kill(syscall.SIGTERM); return s.lastExit(s.Edge) },
		HealAt: 3 * time.Second,
		Heal:   func() error { return s.restart(s.Edge, s.waitEdge) },
		During: healthy.with("err", "503 BUSY"), Settle: time.Second,
	})
}

// TestEdgeKilled: the edge with its in-process engine is SIGKILLed under
// load — occupancies it took may never reach Kafka (the orphan sweeper must
// give them back) and tickets Kafka acked may never be answered — and
// started again. Buyers meanwhile get a transport error, or 503 BUSY while
// the new edge waits for its servers.
func TestEdgeKilled(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL the edge (in-process engine) and start it again", At: 3 * time.Second,
		Inject: func() error { s.Edge.kill(syscall.SIGKILL); return nil },
		HealAt: 4 * time.Second,
		Heal:   func() error { return s.restart(s.Edge, s.waitEdge) },
		During: healthy.with("err", "503 BUSY"), Settle: time.Second,
	})
}

// TestEngineSidecarKilled: the engine sidecar is SIGKILLed mid-sale and
// started again 2.5s later. Buyers meanwhile get 503 BUSY once the edge's
// circuit breaker opens — or wait for the restarted engine: the sidecar
// client keeps a call queued (redialling) until its 5s timeout, and the
// breaker counts only calls that failed, so a call may simply be answered
// late. Either way no ticket is lost.
func TestEngineSidecarKilled(t *testing.T) {
	sc := newScenario(t, Options{Sidecar: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "SIGKILL the engine sidecar", At: 3 * time.Second,
		Inject: func() error { s.Engine.kill(syscall.SIGKILL); return nil },
		HealAt: 5500 * time.Millisecond,
		Heal:   func() error { return s.restart(s.Engine, s.waitEngine) },
		During: busy, Settle: 3 * time.Second, // the breaker's probe and the redial after the restart
	})
}

// TestSidecarSale is the plain sale through the engine sidecar, no fault:
// the baseline the sidecar fault scenario builds on.
func TestSidecarSale(t *testing.T) {
	sc := newScenario(t, Options{Sidecar: true})
	load, skus := crowd()
	load.Users, load.Repeats = load.Users/2, load.Repeats/2
	sc.open(skus)
	run := sc.s.buy(context.Background(), load)
	run.Allowed = healthy
	sc.s.expect("the sidecar engine sells an activity created after it started", run.accepted() > 0,
		"%d accepted: %s", run.accepted(), run.summary())
	sc.finish(run)
}

// TestReplayFromZero: after a first crowd, the whole orders topic is
// consumed again from offset 0 by a fresh consumer group; orders, results
// and stock must not change at all. Then a second crowd buys what is left:
// the replay (the fault here) must not have stopped the sale.
func TestReplayFromZero(t *testing.T) {
	sc := newScenario(t, Options{})
	_, skus := crowd()
	sc.open(skus)
	s := sc.s
	run := s.buy(context.Background(), LoadSpec{Users: 800, Repeats: 100, HotFrac: 0.75, Rate: 120, Workers: 32, Seed: 1})
	sc.run = run
	s.quiesce(run, skus, 60*time.Second)
	before := s.fingerprint(skus)
	replay := s.newConsumer("consumer-replay", "seckill-replay")
	fr := &faultRun{faultPlan: faultPlan{Name: "replay the orders topic from offset 0 in a fresh group", During: healthy}}
	fr.Injected = time.Now()
	if err := s.restart(replay, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.quiesceGroup("seckill-replay", 90*time.Second); err != nil {
		t.Error(err)
	}
	fr.Healed = time.Now()
	t.Logf("replay group drained %d+ messages in %v", run.accepted(), fr.Healed.Sub(fr.Injected).Round(time.Millisecond))
	replay.kill(syscall.SIGTERM)
	after := s.fingerprint(skus)
	for _, d := range before.diff(after) {
		t.Errorf("replay changed the books: %s", d)
	}
	more := s.buy(context.Background(), LoadSpec{Users: 400, HotFrac: 0.75, Rate: 120, Workers: 32, Seed: 2, FirstUser: 100001})
	t.Logf("after the replay, new buyers got: %s", more.summary())
	run.add(more.Attempts...)
	run.Fault = fr
	sc.finish(run)
}

// TestWindowEdges: requests just before the start and just after the end of
// a sale, judged by the server's clock (Redis TIME): nothing before the
// start and nothing at or after the end is accepted. Fast.
func TestWindowEdges(t *testing.T) {
	sc := newScenario(t, Options{})
	s := sc.s
	now := s.serverTime()
	// Whole milliseconds: the occupy script compares milliseconds.
	start := now.Add(3 * time.Second).Truncate(time.Millisecond)
	end := start.Add(3 * time.Second)
	a := activity{ID: activityID, Start: start, End: end, State: stateOnline,
		SKUs: []skuSpec{{ID: skuNormal, Stock: 1000, Price: "9.90", LimitPerUser: 1}, {ID: skuHot, Stock: 10, Price: "9.90", LimitPerUser: 1, Hot: true}}}
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

	run := &Run{}
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
			run.add(a)
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
	if err := p.Err(); err != nil {
		return fmt.Errorf("%s exited with %v after SIGTERM:\n%s", p.Name, err, p.Tail(20))
	}
	return nil
}

// fingerprint is everything a replay must leave as it was.
type fingerprint struct {
	Orders  map[string]string // requestNo -> orderNo status user
	Results map[string]string // requestNo -> state orderNo code
	Redis   map[int64]string  // sku -> stock sold users claimed
}

func (s *System) fingerprint(skus map[int64]int64) fingerprint {
	s.t.Helper()
	b, err := s.readBooks(skus)
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
		f.Results[rn] = fmt.Sprintf("%s %s %s", r[fieldState], r[fieldOrderNo], r[fieldCode])
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
