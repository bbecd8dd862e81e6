package chaos

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// Restarts at real data sizes. A Redis that restarts on a large
// append-only file answers LOADING until it has read it; the processes
// must ride that out. The redis-servers here load their files slowly on
// purpose (testenv: key-load-delay), so the loading lasts seconds with the
// data sizes a test can afford.

// restartCrowd is the crowd of the restart scenario: about ten thousand
// tickets (24 s of buying at 550 a second: the suite's processes are built
// with -race, and a faster crowd starves two cores into timeouts that are
// not the fault's).
func restartCrowd() (LoadSpec, map[int64]int64) {
	return LoadSpec{Users: 13000, Repeats: 500, HotFrac: 0.75, Rate: 550, Workers: 48, Seed: 16},
		map[int64]int64{skuNormal: 3000, skuHot: 9000}
}

// probe is one request sent while Redis was loading, and its answer.
type probe struct {
	What   string
	Status int
	Code   string
	Err    error
}

func (p probe) String() string {
	if p.Err != nil {
		return fmt.Sprintf("%s: %v", p.What, p.Err)
	}
	return fmt.Sprintf("%s: %d %s", p.What, p.Status, p.Code)
}

func code(b []byte) string {
	var a struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &a)
	return a.Code
}

// loadingProbes asks the edge, while both redis-servers load, what every
// kind of request gets: a purchase by a new buyer (the user × SKU window
// and the occupy script need Redis), the result and the result events of
// a ticket accepted before the restart, /readyz and /healthz.
func (s *System) loadingProbes(accepted ticket, buyer *attempt) []probe {
	var out []probe
	add := func(what string, st int, b []byte, err error) {
		out = append(out, probe{What: what, Status: st, Code: code(b), Err: err})
	}
	s.attempt(buyer)
	out = append(out, probe{What: "purchase", Status: buyer.Status, Code: buyer.Code})
	st, b, err := s.get("/api/v1/flash-sale/result/"+accepted.RequestNo, accepted.User)
	add("result", st, b, err)
	st, b, err = s.get("/api/v1/flash-sale/result/"+accepted.RequestNo+"/events", accepted.User)
	add("result events", st, b, err)
	st, b, err = s.get("/readyz", 0)
	add("readyz", st, b, err)
	st, b, err = s.get("/healthz", 0)
	add("healthz", st, b, err)
	return out
}

// TestRedisRestartedUnderARunningEdge: mid-sale, both redis-servers (the
// default one and the hot-SKU shard) are restarted cleanly on their
// append-only files, which they take about four seconds to load. The edge,
// its in-process engine and the consumer keep running throughout. While
// Redis loads, every request that needs it is answered 503 BUSY (fail
// closed: nothing is accepted, nothing is refused as unknown or sold out),
// /readyz says not ready and /healthz alive; the watcher rebuilds nothing
// (the keys are there, just not yet); once loaded, the sale goes on where
// it was and every invariant holds. Fast: runs in make test.
func TestRedisRestartedUnderARunningEdge(t *testing.T) {
	sc := newScenario(t, Options{RedisPersist: true})
	s := sc.s
	load, skus := restartCrowd()
	sc.open(skus)

	// A ticket accepted before the restart, to read back while Redis loads.
	first := attempt{User: 900_000_001, SKU: skuNormal}
	s.attempt(&first)
	if first.Status != 200 {
		t.Fatalf("a purchase before the crowd: %+v", first)
	}
	firstTicket := ticket{RequestNo: first.RequestNo, User: first.User, SKU: first.SKU}
	probeBuyer := attempt{User: 900_000_002, SKU: skuHot}

	var (
		mu                   sync.Mutex
		loadStart, loadEnd   time.Time
		loaded               [2]time.Time // when each of s.redisServers() was seen loaded
		probes               []probe
		restartErr, probeErr error
	)
	run, _ := s.buyWithFault(load, faultPlan{
		Name: "restart both redis-servers on their append-only files, loading for ~4s", At: 8 * time.Second,
		Inject: func() error {
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, r := range s.redisServers() {
				wg.Go(func() { errs[i] = r.RestartLoading(4 * time.Second) })
			}
			wg.Wait()
			mu.Lock()
			loadStart = time.Now()
			mu.Unlock()
			if err := firstErr(errs...); err != nil {
				restartErr = err
				return err
			}
			if l, err := s.Redis.Loading(); err != nil || !l {
				probeErr = fmt.Errorf("the default Redis is not loading after the restart (%v): the test needs a longer load", err)
				return probeErr
			}
			got := s.loadingProbes(firstTicket, &probeBuyer)
			// The probes read the default Redis (the first ticket's
			// result) and buy on the hot shard: both must still load.
			for _, r := range s.redisServers() {
				if l, _ := r.Loading(); !l {
					probeErr = fmt.Errorf("loading of %s ended while the probes ran: the test needs a longer load", r.Addr)
					return probeErr
				}
			}
			mu.Lock()
			probes = got
			mu.Unlock()
			return nil
		},
		HealAt: 9 * time.Second,
		Heal: func() error {
			// Each server's own end: a SKU's purchases need only its
			// shard (the accept path's one call), so the hot SKU may sell
			// again while the default Redis still loads.
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, r := range s.redisServers() {
				wg.Go(func() {
					errs[i] = r.WaitLoaded(90 * time.Second)
					mu.Lock()
					loaded[i] = time.Now()
					mu.Unlock()
				})
			}
			wg.Wait()
			mu.Lock()
			loadEnd = time.Now()
			mu.Unlock()
			return firstErr(errs...)
		},
		// Busy while the servers load; the edge's connections reconnect
		// after the restart (their first command may fail with EOF).
		During: busy, Settle: 3 * time.Second,
	})
	// The books count every ticket the edge accepted, the test's own too.
	for _, a := range []attempt{first, probeBuyer} {
		run.Attempts = append(run.Attempts, a)
		if a.Status == 200 {
			run.Tickets[a.RequestNo] = ticket{RequestNo: a.RequestNo, User: a.User, SKU: a.SKU}
		}
	}
	if restartErr != nil || probeErr != nil {
		t.Fatalf("restart: %v %v", restartErr, probeErr)
	}
	t.Logf("both redis-servers loaded %v after the restart", loadEnd.Sub(loadStart).Round(time.Millisecond))

	// While Redis loads: what each kind of request got.
	want := map[string]int{"purchase": 503, "result": 503, "result events": 503, "readyz": 503, "healthz": 200}
	for _, p := range probes {
		ok := p.Err == nil && p.Status == want[p.What] && (p.What == "readyz" || p.What == "healthz" || p.Code == "BUSY")
		s.expect("while Redis loads, "+p.What+" answers "+fmt.Sprint(want[p.What]), ok, "%s", p)
	}
	if len(probes) != len(want) {
		t.Errorf("%d probes ran, want %d", len(probes), len(want))
	}
	// The crowd while its SKU's shard loaded: nothing accepted, nothing
	// refused as if the sale were over or unknown; busy answers, and a
	// sale that goes on afterwards.
	var during, after, busy int
	wrong := map[string]int{}
	for _, a := range run.Attempts {
		answered := a.Sent.Add(a.Took)
		end := loaded[0] // the default Redis
		if a.SKU == skuHot {
			end = loaded[1]
		}
		switch {
		// end is when the harness saw the shard's loading over (it polls
		// every 20ms): a margin keeps requests answered just after the
		// real end out of the count.
		case a.Sent.After(loadStart) && answered.Before(end.Add(-200*time.Millisecond)):
			during++
			key := fmt.Sprintf("%d %s", a.Status, a.Code)
			switch a.Code {
			case "BUSY":
				busy++
			case "RATE_LIMITED", "DUPLICATE":
				// local refusals: they take nothing
			default:
				wrong[key]++
			}
		case a.Sent.After(loadEnd) && a.Status == 200:
			after++
		}
	}
	s.expect("while its SKU's Redis loads, buyers get 503 BUSY and no ticket", busy > 0 && len(wrong) == 0,
		"%d answered during the load: %d BUSY, others %v", during, busy, wrong)
	s.expect("after Redis has loaded, the sale goes on", after > 0, "%d accepted after the load", after)
	rebuilt := s.Edge.Count("Redis lost the SKU; rebuilt from the database")
	waitedLine := s.Edge.Count("Redis is loading its dataset: the watcher rebuilds nothing and waits")
	s.expect("the watcher rebuilds nothing from a loading Redis", rebuilt == 0 && waitedLine > 0,
		"%d rebuilds, %d lines saying it waits", rebuilt, waitedLine)
	sc.finish(run)
}

// redisServers are the default and the hot-SKU redis-server.
func (s *System) redisServers() []*testenv.Redis { return []*testenv.Redis{s.Redis, s.Hot} }
