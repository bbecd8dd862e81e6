package chaos

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"seckill/sale"
)

// Queue mode under faults (DESIGN §13): both SKUs are switched to queue
// mode through the admin API before the crowd comes, and drained at
// queueRate attempts per second each — slower than the crowd arrives, so
// a line builds and the fault meets it mid-way. Then the process running
// the drainer, or the broker that holds the line, is SIGKILLed and
// started again. The checker's queue verdicts (judgeWaiting) demand that
// every attempt answered 202 WAITING ends SUCCESS or FAIL with the
// ledger's reason, none is served twice, no result is left WAITING, and
// the books hold as after any fault: exactly the stock in orders, one per
// buyer, answers that match the orders.

// queueRate is the drain pace of each SKU's line (attempts per second).
const queueRate = 30

// queueCrowd is the load of the queue scenarios: 1,000 buyers and 200
// repeats at 100 a second (12 s), half on each SKU — 50 a second into a
// line drained at 30 — on 200 units each, so the line is ~60 long at the
// fault (3 s) and the stock sells out after it.
func queueCrowd() (LoadSpec, map[int64]int64) {
	return LoadSpec{Users: 1000, Repeats: 200, HotFrac: 0.5, Rate: 100, Workers: 32, Seed: 3},
		map[int64]int64{skuNormal: 200, skuHot: 200}
}

// queueScenario opens the sale, switches both SKUs to queue mode and runs
// load with the fault plan makes, then checks the books. A fault that
// finds no waiting ticket did not strike mid-line, and fails the scenario.
func queueScenario(t *testing.T, o Options, load LoadSpec, skus map[int64]int64, plan func(s *System, midLine func()) faultPlan) {
	o.Queue = true
	sc := newScenario(t, o)
	s := sc.s
	sc.open(skus)
	s.queueMode(queueRate, skuNormal, skuHot)
	waiting := -1
	midLine := func() {
		if b, err := s.readBooks(skus); err == nil {
			waiting = len(b.inState(stateWaiting))
		}
		s.t.Logf("at the fault: %d tickets WAITING", waiting)
	}
	p := plan(s, midLine)
	p.Healthy = healthyQueue
	heal := p.Heal
	type movement struct {
		served map[int64]bool
		how    string
	}
	moved := make(chan movement, 1)
	p.Heal = func() error {
		err := heal()
		go func() {
			served, how := s.lineMoves(skus, 20*time.Second)
			moved <- movement{served, how}
		}()
		return err
	}
	run, _ := s.buyWithFault(load, p)
	m := <-moved
	run.Fault.LineServed = m.served
	t.Logf("after the heal %s", m.how)
	s.expect("the fault struck mid-line", waiting > 0, "%d tickets WAITING when it struck", waiting)
	sc.finish(run)
}

// TestQueueEdgeKilled: the edge with its in-process engine — and so the
// drainer — is SIGKILLed mid-line and started again. The window it was
// occupying is left undecided or half decided, its offsets uncommitted;
// the restarted drainer gets the partitions again and drains the line
// from the last committed offset: the attempts decided already are found
// decided (their result past WAITING, or their own record in the ledger).
// Buyers meanwhile get a transport error, or 503 BUSY while the new edge
// waits for its servers.
func TestQueueEdgeKilled(t *testing.T) {
	load, skus := queueCrowd()
	queueScenario(t, Options{}, load, skus, func(s *System, midLine func()) faultPlan {
		return faultPlan{
			Name: "SIGKILL the edge (in-process engine and drainer) mid-line, start it again", At: 3 * time.Second,
			Inject: func() error { midLine(); s.Edge.kill(syscall.SIGKILL); return nil },
			HealAt: 4 * time.Second,
			Heal:   func() error { return s.restart(s.Edge, s.waitEdge) },
			During: healthyQueue.with("err", "503 BUSY"), Settle: time.Second,
		}
	})
}

// TestQueueEngineKilled: the engine sidecar (`seckill engine`, which runs
// the drainer) is SIGKILLed mid-line and started again 2 s later. The edge
// appends attempts to the line itself, so buyers go on getting 202
// WAITING while no drainer runs; the restarted one drains the line from
// its last committed offset, exactly once.
func TestQueueEngineKilled(t *testing.T) {
	load, skus := queueCrowd()
	queueScenario(t, Options{Sidecar: true}, load, skus, func(s *System, midLine func()) faultPlan {
		return faultPlan{
			Name: "SIGKILL the engine sidecar (the drainer) mid-line, start it again", At: 3 * time.Second,
			Inject: func() error { midLine(); s.Engine.kill(syscall.SIGKILL); return nil },
			HealAt: 5 * time.Second,
			Heal:   func() error { return s.restart(s.Engine, s.waitEngine) },
			During: healthyQueue,
		}
	})
}

// TestQueueBrokerKilled: the broker, which holds the line, is SIGKILLed
// mid-line and started again 2 s later on its data directory. Buyers
// meanwhile get 503 BUSY (no WAITING answer without a durable attempt);
// the drainer's session ends, the order messages of the attempts it was
// occupying fail and are released, their tickets WAITING again at their
// place, and the line resumes from the committed offset once the broker
// is back — up to ~10 s later, while Sarama's per-partition breakers stay
// open (TestBrokerKilled). The crowd runs on (21 s) so that places taken
// after that are seen.
func TestQueueBrokerKilled(t *testing.T) {
	load, skus := queueCrowd()
	load.Users, load.Repeats = 1800, 300
	queueScenario(t, Options{}, load, skus, func(s *System, midLine func()) faultPlan {
		return faultPlan{
			Name: "SIGKILL the broker mid-line, start it again", At: 3 * time.Second,
			Inject: func() error { midLine(); s.Broker.kill(syscall.SIGKILL); return nil },
			HealAt: 5 * time.Second,
			Heal:   func() error { return s.restart(s.Broker, s.waitBroker) },
			During: healthyQueue.with("503 BUSY"), Settle: 11 * time.Second,
		}
	})
}

// lineMoves waits, up to d, until each SKU's line serves a ticket that
// was WAITING when it began (its result now QUEUING or SUCCESS: a claim
// or a result write of a ticket served before does not count), and says
// which did and how long that took: how long the line stood still after
// the fault healed.
func (s *System) lineMoves(skus map[int64]int64, d time.Duration) (map[int64]bool, string) {
	start := time.Now()
	var waiting map[string]int64 // requestNo -> SKU, WAITING at the first read
	served := map[int64]bool{}
	for time.Since(start) < d {
		b, err := s.readBooks(skus) // fails while a broker is just back
		switch {
		case err != nil:
		case waiting == nil:
			waiting = map[string]int64{}
			for _, rn := range b.inState(stateWaiting) {
				if _, sku, _, ok := sale.ParseRequestNo(rn); ok {
					waiting[rn] = sku
				}
			}
		default:
			for rn, sku := range waiting {
				if st := b.Results[rn][fieldState]; st == stateQueuing || st == stateSuccess {
					served[sku] = true
				}
			}
			left := 0
			for _, sku := range waiting {
				if !served[sku] {
					left++
				}
			}
			if len(waiting) > 0 && left == 0 {
				return served, fmt.Sprintf("every line served again within %v", time.Since(start).Round(100*time.Millisecond))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return served, fmt.Sprintf("within %v the lines of SKUs %v served a ticket waiting at the heal (%d were)", d, served, len(waiting))
}
