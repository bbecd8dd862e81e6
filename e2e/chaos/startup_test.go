package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// Start-up: every process waits for its servers instead of
// dying on them, answering its probes meanwhile, and gives up after
// start_timeout naming what never came.

// waitLines counts, in log, the start-up wait's lines about dep: when the
// wait began, while it lasted, when it ended.
func waitLines(log, dep string) (first, still, ready int) {
	d := fmt.Sprintf("{\"dependency\": %q", dep)
	return strings.Count(log, "\twaiting for a dependency\t"+d),
		strings.Count(log, "\tstill waiting for a dependency\t"+d),
		strings.Count(log, "\tdependency ready\t"+d)
}

// mergeRuns adds b's attempts and tickets to a.
func mergeRuns(a, b *Run) {
	a.Attempts = append(a.Attempts, b.Attempts...)
	for rn, tk := range b.Tickets {
		a.Tickets[rn] = tk
	}
	for k, n := range b.Statuses {
		a.Statuses[k] += n
	}
	a.Took += b.Took
}

// TestPartsStartOnALoadingRedis: after a first sale, the edge and the
// consumer are stopped and both redis-servers restart on their append-only
// files, loading for about six seconds. A consumer with a one-second
// start_timeout exits naming redis.default. The edge and the consumer
// started meanwhile wait: the edge's /healthz answers, its /readyz and its
// buyer API answer 503 naming redis.default, its log says once what it
// waits for (not once per retry); once Redis has loaded they serve, the
// sale goes on and every invariant holds. Fast: runs in make test.
func TestPartsStartOnALoadingRedis(t *testing.T) {
	sc := newScenario(t, Options{RedisPersist: true})
	s := sc.s
	skus := map[int64]int64{skuNormal: 200, skuHot: 800}
	sc.open(skus)
	first := s.buy(context.Background(), LoadSpec{Users: 400, HotFrac: 0.75, Rate: 300, Workers: 16, Seed: 3})
	if first.accepted() == 0 {
		t.Fatalf("first sale: nothing accepted: %s", first.summary())
	}
	s.Edge.kill(syscall.SIGTERM)
	s.Consumer.kill(syscall.SIGTERM)

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, r := range s.redisServers() {
		wg.Go(func() { errs[i] = r.RestartLoading(6 * time.Second) })
	}
	wg.Wait()
	restarted := time.Now()
	if err := firstErr(errs...); err != nil {
		t.Fatal(err)
	}

	// A start timeout shorter than the load.
	quick := s.newProc("consumer-start-timeout", []string{"consumer", "--config", s.cfgPath},
		[]string{"SECKILL_START_TIMEOUT=1s", "SECKILL_CONSUMER_INSTANCE_ID=chaos-start-timeout"})
	if err := quick.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-quick.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("a consumer with a 1s start timeout still runs after 30s:\n%s", quick.Tail(20))
	}
	var exit *exec.ExitError
	quickLog := quick.SinceStart()
	s.expect("start_timeout passed: the process exits naming the dependency",
		errors.As(quick.Err(), &exit) && exit.ExitCode() == 1 &&
			strings.Contains(quickLog, "seckill consumer: start_timeout (1s) passed while waiting for redis.default") &&
			strings.Contains(quickLog, "LOADING"),
		"exit %v; last lines:\n%s", quick.Err(), quick.Tail(3))

	if err := firstErr(s.restart(s.Edge, nil), s.restart(s.Consumer, nil)); err != nil {
		t.Fatal(err)
	}
	// While Redis loads: probes, a buyer, the admin API.
	var seen []string
	for {
		l, err := s.Redis.Loading()
		if err != nil {
			t.Fatal(err)
		}
		if !l {
			break
		}
		st, body, err := s.get("/readyz", 0)
		if err != nil { // the edge has not opened its listener yet
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if st != 503 || !strings.Contains(string(body), "redis.default") {
			seen = append(seen, fmt.Sprintf("readyz %d %s", st, body))
			time.Sleep(50 * time.Millisecond)
			continue
		}
		hst, _, herr := s.get("/healthz", 0)
		buyer := attempt{User: 700_000_001, SKU: skuHot}
		s.attempt(&buyer)
		ast, _, aerr := s.admin("GET", "/admin/v1/activities", nil)
		if l, _ := s.Redis.Loading(); !l {
			break // the answers may already be the served process'
		}
		seen = append(seen, fmt.Sprintf("readyz %d, healthz %d %v, purchase %d %s, admin %d %v", st, hst, herr, buyer.Status, buyer.Code, ast, aerr))
		s.expect("while waiting for Redis: /healthz 200, /readyz 503, buyers and admin 503",
			hst == 200 && buyer.Status == 503 && buyer.Code == "BUSY" && ast == 503,
			"%s", seen[len(seen)-1])
		break
	}
	s.expect("the edge started during the load and waited for redis.default", len(seen) > 0 && strings.HasPrefix(seen[len(seen)-1], "readyz 503"),
		"answers seen while Redis loaded: %v", seen)
	for _, r := range s.redisServers() {
		if err := r.WaitLoaded(90 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	loaded := time.Since(restarted)
	if err := s.waitEdge(s.Edge); err != nil {
		t.Fatal(err)
	}
	edgeLog := s.Edge.SinceStart()
	f, still, ready := waitLines(edgeLog, "redis.default")
	s.expect("one log line when the wait begins, one per 5s while it lasts, one when it ends",
		f == 1 && ready == 1 && still <= int(loaded/(5*time.Second))+1,
		"edge: %d, %d, %d lines about redis.default over %v", f, still, ready, loaded.Round(time.Millisecond))
	// The edge being up says nothing of the consumer: give it the time to
	// see Redis loaded and log so (its own readiness, not the edge's).
	var cf, cready int
	_ = s.Consumer.Await(15*time.Second, "the consumer's ready line", func() error {
		if cf, _, cready = waitLines(s.Consumer.SinceStart(), "redis.default"); cready == 0 {
			return errNotYet
		}
		return nil
	})
	s.expect("the consumer waited for redis.default too", cf == 1 && cready == 1, "consumer: %d first, %d ready lines", cf, cready)

	second := s.buy(context.Background(), LoadSpec{Users: 600, FirstUser: 10_001, HotFrac: 0.75, Rate: 300, Workers: 16, Seed: 4})
	s.expect("the sale goes on after the restart", second.accepted() > 0, "%s", second.summary())
	mergeRuns(first, second)
	sc.finish(first)
}

// TestPartsWaitForBrokerAndDatabase: the engine sidecar, the edge and the
// consumer are started while the broker is down and MariaDB is cut off
// (connections hang). Each waits — its log names what for, the edge's and
// the consumer's probes answer alive and not ready — and goes on once the
// broker is back and the database answers; then the sale runs and every
// invariant holds. Fast: runs in make test.
func TestPartsWaitForBrokerAndDatabase(t *testing.T) {
	sc := newScenario(t, Options{Sidecar: true, DBProxy: true})
	s := sc.s
	skus := map[int64]int64{skuNormal: 100, skuHot: 400}
	sc.open(skus)
	for _, p := range []*proc{s.Edge, s.Consumer, s.Engine} {
		p.kill(syscall.SIGTERM)
	}
	s.Broker.kill(syscall.SIGTERM)
	s.proxy.Partition()

	metrics := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	consumer := s.newProc("consumer-metrics", []string{"consumer", "--config", s.cfgPath},
		[]string{"SECKILL_CONSUMER_INSTANCE_ID=chaos-consumer", "SECKILL_METRICS_LISTEN=" + metrics})
	s.consumers = append(s.consumers, consumer)
	for _, p := range []*proc{s.Engine, s.Edge, consumer} {
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
	}
	metricsGet := func(path string) (int, string) {
		st, b, err := s.do("GET", "http://"+metrics+path, 0, nil, nil)
		if err != nil {
			return 0, err.Error()
		}
		return st, string(b)
	}
	// Each says what it waits for; nothing exits.
	wantWaits := map[*proc][]string{s.Engine: {"kafka", "database"}, s.Edge: {"database"}, consumer: {"kafka", "database"}}
	deadline := time.Now().Add(20 * time.Second)
	for p, deps := range wantWaits {
		for _, dep := range deps {
			if err := p.Await(time.Until(deadline), "its one line of waiting for "+dep, func() error {
				if f, _, _ := waitLines(p.SinceStart(), dep); f != 1 {
					return fmt.Errorf("%d such lines since its start", f)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, body, err := s.get("/readyz", 0)
	hst, _, herr := s.get("/healthz", 0)
	s.expect("the edge, waiting for the database: /readyz 503 naming it, /healthz 200",
		err == nil && st == 503 && strings.Contains(string(body), "database") && herr == nil && hst == 200,
		"readyz %d %s %v, healthz %d %v", st, body, err, hst, herr)
	mst, mbody := metricsGet("/readyz")
	mhst, _ := metricsGet("/healthz")
	s.expect("the consumer, waiting: its metrics listener answers /healthz 200, /readyz 503",
		mst == 503 && strings.Contains(mbody, "kafka") && mhst == 200, "readyz %d %s, healthz %d", mst, mbody, mhst)

	if err := s.restart(s.Broker, s.waitBroker); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{s.Engine, consumer} {
		if err := p.Await(20*time.Second, "its log line: kafka ready", func() error {
			if _, _, r := waitLines(p.SinceStart(), "kafka"); r != 1 {
				return errNotYet
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range wantWaits {
		s.expect(p.Name+" still waits for the database once the broker is back", p.Running() && !strings.Contains(p.SinceStart(), "\tdependency ready\t{\"dependency\": \"database\""),
			"running %v", p.Running())
	}
	s.proxy.Heal()
	if err := firstErr(s.waitEngine(s.Engine), s.waitEdge(s.Edge)); err != nil {
		t.Fatal(err)
	}
	if err := consumer.Await(30*time.Second, "/readyz 200 on its metrics listener", func() error {
		if st, b := metricsGet("/readyz"); st != 200 {
			return fmt.Errorf("%d %s", st, b)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st, b := metricsGet("/metrics"); st != 200 || !strings.Contains(b, "seckill_consumer_") {
		t.Errorf("/metrics once serving: %d", st)
	}
	s.Consumer = consumer
	run := s.buy(context.Background(), LoadSpec{Users: 800, Repeats: 100, HotFrac: 0.75, Rate: 300, Workers: 16, Seed: 5})
	s.expect("the sale runs once every dependency came", run.accepted() > 0, "%s", run.summary())
	sc.finish(run)
}
