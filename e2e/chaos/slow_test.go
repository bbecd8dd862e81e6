package chaos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/faultproxy"
	"seckill/internal/testenv"
)

// Slow, not dead: the scenarios here make a dependency stall or drag
// instead of killing it — a redis-server that pauses its writes (a fork, an
// fsync), a broker whose acks take 200 ms, a database that answers after a
// second. Each says which answers the crowd may get meanwhile; the books
// must hold as after any other fault.

// The stall rhythm: one redis-server's writes are paused stallPause out of
// every stallEvery, for stallFor (700 ms each second for 6 s: what a
// fork-heavy or fsync-bound Redis does to its clients).
const (
	stallFor   = 6 * time.Second
	stallPause = 700 * time.Millisecond
	stallEvery = time.Second
)

// staller pauses one redis-server's writes in the stall rhythm from start
// until stop.
type staller struct {
	r      *testenv.Redis
	t      *testing.T
	stop   chan struct{}
	done   chan error
	pauses int
}

func newStaller(t *testing.T, r *testenv.Redis) *staller {
	return &staller{r: r, t: t, stop: make(chan struct{}), done: make(chan error, 1)}
}

// start begins the pauses (CLIENT PAUSE <ms> WRITE: reads go on, every
// write and script waits until the pause ends).
func (st *staller) start() error {
	c := st.r.Client(st.t)
	pause := func() error {
		return c.Do(context.Background(), c.B().Arbitrary("CLIENT", "PAUSE").Args(fmt.Sprint(stallPause.Milliseconds()), "WRITE").Build()).Error()
	}
	if err := pause(); err != nil {
		return err
	}
	st.pauses = 1
	go func() {
		tick := time.NewTicker(stallEvery)
		defer tick.Stop()
		for {
			select {
			case <-st.stop:
				st.done <- c.Do(context.Background(), c.B().Arbitrary("CLIENT", "UNPAUSE").Build()).Error()
				return
			case <-tick.C:
				if err := pause(); err != nil {
					st.done <- err
					return
				}
				st.pauses++
			}
		}
	}()
	return nil
}

// end stops the pauses and lifts the one in force.
func (st *staller) end() error {
	close(st.stop)
	err := <-st.done
	st.t.Logf("%d write pauses of %v, one every %v", st.pauses, stallPause, stallEvery)
	return err
}

// stallScenario runs the standard crowd while r (the default Redis or the
// hot shard) stalls its writes for stallFor from 3 s on. An occupy that
// meets a pause waits past engine.occupy_timeout (500 ms) and is answered
// 503 BUSY, fail closed (its occupancy, taken once the pause lifts, is the
// orphan sweeper's to give back); nothing else may change, and sales go on
// right after the last pause.
func stallScenario(t *testing.T, which string, pick func(*System) *testenv.Redis) {
	sc := newScenario(t, Options{})
	s := sc.s
	st := newStaller(t, pick(s))
	sc.withFault(faultPlan{
		Name: fmt.Sprintf("pause the %s's writes %v every %v for %v", which, stallPause, stallEvery, stallFor), At: 3 * time.Second,
		Inject: st.start,
		HealAt: 3*time.Second + stallFor,
		Heal:   st.end,
		// The occupies queued behind the last pause run once it lifts;
		// on two busy cores their answers may trail it by a second or two.
		During: busy, Settle: 3 * time.Second,
	})
}

// TestHotShardStalled: the hot SKU's redis-server pauses its writes 700 ms
// of every second for 6 s mid-sale.
func TestHotShardStalled(t *testing.T) {
	stallScenario(t, "hot shard", func(s *System) *testenv.Redis { return s.Hot })
}

// TestDefaultRedisStalled: the default Redis (the normal SKU's ledger, the
// fleet set, the blocklist, the catalog) pauses its writes likewise.
func TestDefaultRedisStalled(t *testing.T) {
	stallScenario(t, "default Redis", func(s *System) *testenv.Redis { return s.Redis })
}

// TestBrokerSlow: every answer of the broker (produce acks, fetches,
// metadata) comes 200 ms ± 100 ms late for 6 s. The engine answers QUEUING
// only once the broker acknowledged the message, so buyers wait that much
// longer — well inside engine.kafka.send_timeout (3 s) — and get the
// healthy answers: no 503, no ticket lost.
func TestBrokerSlow(t *testing.T) {
	sc := newScenario(t, Options{BrokerProxy: true})
	s := sc.s
	slow := faultproxy.Latency{Delay: 200 * time.Millisecond, Jitter: 100 * time.Millisecond}
	sc.withFault(faultPlan{
		Name: "the broker's answers +200ms ± 100ms for 6s", At: 3 * time.Second,
		Inject: func() error { s.brokerProxy.SetLatency(faultproxy.ToClient, slow); return nil },
		HealAt: 9 * time.Second,
		Heal:   func() error { s.brokerProxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{}); return nil },
		During: healthy, Settle: time.Second,
	})
}

// TestDatabaseSlow: every answer of MariaDB comes a second late for 6 s.
// The database is not on the buyer's path: buyers get the healthy answers,
// or 429 BACKLOG while the backlog it leaves drains slowly; the consumer's
// batches take seconds, and every ticket still becomes an order.
func TestDatabaseSlow(t *testing.T) {
	sc := newScenario(t, Options{DBProxy: true})
	s := sc.s
	sc.withFault(faultPlan{
		Name: "MariaDB's answers +1s for 6s", At: 2 * time.Second,
		Inject: func() error {
			s.proxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{Delay: time.Second})
			return nil
		},
		HealAt: 8 * time.Second,
		Heal: func() error {
			n, err := s.lag()
			s.t.Logf("consumer lag after 6s of a slow database: %d (%v)", n, err)
			s.proxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{})
			return err
		},
		// Coming back, the consumer retries the transactions the slow
		// database timed out and drains slowly for a moment: the drain
		// time it shows may pass consumer.lag_high (30 s) for a few
		// samples, and the edge then sheds with 429 BACKLOG (seen: 1 s,
		// right after the heal) — the designed answer to a backlog.
		During: healthy.with("429 BACKLOG"), Settle: 4 * time.Second,
	})
}

// TestBacklogBackpressure (seed §16 scenario 2, "MQ backlog rising"):
// MariaDB answers a second late for 5 s, so the consumer falls behind the
// crowd and a backlog builds in Kafka while the edge would go on answering
// QUEUING. With consumer.lag_high 3s and lag_low 1s (a healthy consumer's
// lag, committed batch by batch on two busy cores, shows up to ~2 s), the
// edge sees the lag need more than 3 s to drain (or wait longer with
// nothing committed)
// and admits only half the rate the consumer commits: the rest of the crowd is answered 429
// BACKLOG with a Retry-After; a buyer's result stays readable meanwhile;
// once the database is fast again the consumer drains the backlog and the
// edge admits everyone again by itself. The books hold.
func TestBacklogBackpressure(t *testing.T) {
	sc := newScenario(t, Options{DBProxy: true, EdgeEnv: []string{
		"SECKILL_CONSUMER_LAG_HIGH=3s", "SECKILL_CONSUMER_LAG_LOW=1s", "SECKILL_CONSUMER_LAG_INTERVAL=250ms"}})
	s := sc.s
	load, skus := crowd()
	// A longer crowd (24 s): the recovery waits for the consumer's
	// transactions caught by the slow database to time out
	// (consumer.timeout, 5 s) and be retried, and buyers must be seen
	// admitted again after it.
	load.Users, load.Repeats = 2600, 250
	skus[skuHot] = 1500
	sc.open(skus)
	probe := attempt{User: 900_001, SKU: skuNormal}
	var resultDuring, shedMetric string
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "MariaDB's answers +1s for 8s: a backlog builds", At: 2 * time.Second,
		Inject: func() error {
			s.attempt(&probe)
			if probe.Status != 200 {
				return fmt.Errorf("probe purchase before the fault: %s", probe.answer())
			}
			s.proxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{Delay: time.Second})
			return nil
		},
		// 8 s: the edge sheds once the lag has waited lag_high (3 s) and
		// five samples agree (1.25 s), so a shorter fault can heal before
		// a fast machine's consumer has been stuck long enough.
		HealAt: 10 * time.Second,
		Heal: func() error {
			n, err := s.lag()
			s.t.Logf("consumer lag after 8s of a slow database: %d (%v)", n, err)
			st, b, rerr := s.get("/api/v1/flash-sale/result/"+probe.RequestNo, probe.User)
			resultDuring = fmt.Sprintf("%d %s %v", st, b, rerr)
			_, m, merr := s.admin("GET", "/metrics", nil)
			shedMetric = metricLine(string(m), `seckill_edge_rejections_total{reason="backlog"}`) + fmt.Sprint(merr)
			s.proxy.SetLatency(faultproxy.ToClient, faultproxy.Latency{})
			return err
		},
		During: healthy.with("429 BACKLOG"),
		// The consumer's slow transactions time out (consumer.timeout,
		// 5 s) and are retried, it drains the backlog, and the next
		// samples see it gone.
		Settle: 8 * time.Second,
	})
	run.add(probe)
	var shed, badRetry int
	for i := range run.Attempts {
		if a := &run.Attempts[i]; a.answer() == "429 BACKLOG" {
			shed++
			if n, err := strconv.Atoi(a.RetryAfter); err != nil || n < 1 {
				badRetry++
			}
		}
	}
	s.expect("new buyers were answered 429 BACKLOG while the backlog lasted", shed > 0, "%d answers 429 BACKLOG", shed)
	s.expect("every 429 BACKLOG carried a Retry-After of at least 1s", badRetry == 0, "%d of %d without one", badRetry, shed)
	s.expect("a buyer's result stayed readable while the edge shed", strings.HasPrefix(resultDuring, "200 "), "%s", resultDuring)
	// The counter, not the shedding gauge: with lag_low 1 s the edge may
	// have opened again (and closed) by the heal.
	_, counted, _ := strings.Cut(strings.TrimSuffix(shedMetric, "<nil>"), " ")
	s.expect("the edge's metrics counted the buyers it shed", counted != "" && counted != "0", "%q", shedMetric)
	sc.finish(run)
}

// metricLine is the line of a Prometheus text exposition of the series
// named (name and labels as exposed), or "".
func metricLine(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return l
		}
	}
	return ""
}
