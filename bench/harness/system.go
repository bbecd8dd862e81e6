package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	_ "modernc.org/sqlite"

	"seckill/admin"
	"seckill/bench/benchkit"
	"seckill/sale"
)

const adminToken = "bench-harness-token-0123456789abcdef"

// system is one seckill deployment under test with its own data directory
// and loopback listeners: `seckill dev` (startSystem), or the parts as separate processes (startParts).
type system struct {
	p                  *benchkit.Proc   // the process serving the edge
	procs              []*benchkit.Proc // every process of the system, stopped newest first
	watch              []watched
	activities         []int64 // the activities it sells
	dir                string  // holds seckill.db, the orders database
	mysqlDSN           string  // the orders database instead, when set (-slow)
	edge, admin, pprof string
	bin                string
	http               *http.Client
	accepted           map[skuKey]int64 // 200 answers the harness saw, per SKU
	unseen             map[skuKey]int64 // requests sent whose answer wrk did not count
}

type skuKey struct{ activity, sku int64 }

// Bench activity: SKU 2001 with stock no run can exhaust (the accept path),
// SKU 2002 with one unit (bought once, then the reject path).
const (
	benchActivity = 2
	acceptSKU     = 2001
	soldOutSKU    = 2002
	demoActivity  = 1
	seedSKU       = 1001
)

func newSystem(bin, dir string, activities ...int64) *system {
	_ = os.RemoveAll(dir)
	return &system{dir: dir, edge: benchkit.FreeAddr(), admin: benchkit.FreeAddr(), bin: bin, activities: activities,
		http: &http.Client{Timeout: 30 * time.Second}, accepted: map[skuKey]int64{}, unseen: map[skuKey]int64{}}
}

// startSystem runs `seckill dev` (the demo activity and the bench
// activity), on config, or on its built-in defaults where config is "".
func startSystem(out, bin, config string) (*system, error) {
	s := newSystem(bin, filepath.Join(out, "seckill-data"), demoActivity, benchActivity)
	s.pprof = benchkit.FreeAddr()
	args := []string{"dev", "--data-dir", s.dir, "--listen", s.edge, "--admin-listen", s.admin, "--pprof", s.pprof}
	if config != "" {
		args = append(args, "--config", config)
	}
	p, err := benchkit.Start(out, "seckill", bin, []string{"SECKILL_ADMIN_TOKEN=" + adminToken}, args...)
	if err != nil {
		return nil, err
	}
	s.p = p
	s.procs = []*benchkit.Proc{p}
	if err := benchkit.WaitReady(p, "http://"+s.edge+"/readyz", 60*time.Second); err != nil {
		return s, err
	}
	if s.watch, err = devWatch(p); err != nil {
		return s, err
	}
	return s, s.preheat()
}

// stop stops the system's processes, newest first.
func (s *system) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		s.procs[i].StopWithin(40 * time.Second)
	}
}

// reDevRedis is seckill dev's banner line naming its redis-servers.
var reDevRedis = regexp.MustCompile(`redis\s+(\S+) \(default\), (\S+) \(hot shard\)`)

// devWatch finds what a cost row of seckill dev reads: the process itself
// (edge, engine, broker and consumer in one) and its two redis-server
// children, found by the addresses its banner prints (INFO server names
// each one's process id).
func devWatch(p *benchkit.Proc) ([]watched, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(p.Log)
		if m := reDevRedis.FindSubmatch(b); m != nil {
			ws := []watched{{role: roleServer, pid: p.PID()}}
			for i, role := range []string{roleRedisDef, roleRedisHot} {
				addr := string(m[i+1])
				pid, err := benchkit.RedisPID(addr)
				if err != nil {
					return nil, fmt.Errorf("seckill dev's %s: %w", role, err)
				}
				ws = append(ws, watched{role: role, pid: pid, redis: addr})
			}
			return ws, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("seckill dev printed no redis addresses (see %s)", p.Log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// preheat creates the bench activity through the admin API and buys SKU
// 2002's one unit as soon as the edge sells it.
func (s *system) preheat() error {
	now := time.Now()
	a := sale.Activity{ID: benchActivity, Start: now.Add(-time.Second).Truncate(time.Second), End: now.Add(3 * time.Hour).Truncate(time.Second),
		State: sale.StateOnline, SKUs: []sale.SKU{
			{ID: acceptSKU, Stock: 50_000_000, Price: 9900, LimitPerUser: 1, Hot: true},
			{ID: soldOutSKU, Stock: 1, Price: 9900, LimitPerUser: 1},
		}}
	if err := s.adminCall("POST", "/admin/v1/activities", a, nil); err != nil {
		return fmt.Errorf("preheat bench activity: %w", err)
	}
	// The edge reloads its catalog every refresh_interval; wait until it
	// sells the new SKUs.
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, _, err := s.buy(soldOutSKU, 1)
		if err == nil && code == http.StatusOK {
			s.accepted[skuKey{benchActivity, soldOutSKU}]++
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge does not sell SKU %d (last answer %d, %v)", soldOutSKU, code, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

func (s *system) orderURL() string { return "http://" + s.edge + "/api/v1/flash-sale/order" }

// buy sends one purchase as user and returns the status and requestNo.
func (s *system) buy(sku, user int64) (int, string, error) {
	return benchkit.Buy(s.http, s.orderURL(), sku, user)
}

// tickets buys n units of the accept SKU for users base+1..base+n and
// writes "user requestNo" lines for poll.lua.
func (s *system) tickets(path string, n int, base int64) error {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		u := base + int64(i)
		code, rn, err := s.buy(acceptSKU, u)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("ticket for user %d: status %d", u, code)
		}
		s.accepted[skuKey{benchActivity, acceptSKU}]++
		fmt.Fprintf(&b, "%d %s\n", u, rn)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func (s *system) adminCall(method, path string, in, out any) error {
	return benchkit.Admin{Addr: s.admin, Token: adminToken, HTTP: s.http}.Call(method, path, in, out)
}

func (s *system) stock(activity int64) (admin.StockReport, error) {
	var rep admin.StockReport
	err := s.adminCall("GET", "/admin/v1/activities/"+strconv.FormatInt(activity, 10)+"/stock", nil, &rep)
	return rep, err
}

// ordered sums the orders of every SKU of the activities and their live
// occupancies (tickets not yet orders).
func (s *system) ordered(activities ...int64) (orders, occupied int64, err error) {
	for _, a := range activities {
		rep, err := s.stock(a)
		if err != nil {
			return 0, 0, err
		}
		for _, k := range rep.SKUs {
			orders += k.Orders
			occupied += k.Occupied
		}
	}
	return orders, occupied, nil
}

// drain is how fast the consumer turned a backlog of tickets into orders.
type drain struct {
	Backlog int64         // tickets waiting when the load stopped
	Orders  int64         // orders landed while draining it
	Took    time.Duration // until no ticket waited
}

func (d drain) rate() float64 {
	if d.Took <= 0 {
		return 0
	}
	return float64(d.Orders) / d.Took.Seconds()
}

// waitDrained polls the admin API until no ticket waits for its order.
func (s *system) waitDrained(timeout time.Duration) (drain, error) {
	start := time.Now()
	orders0, occ0, err := s.ordered(s.activities...)
	if err != nil {
		return drain{}, err
	}
	d := drain{Backlog: occ0}
	for occ := occ0; occ > 0; {
		if time.Since(start) > timeout {
			return d, fmt.Errorf("%d tickets still without an order after %v", occ, timeout)
		}
		time.Sleep(100 * time.Millisecond)
		var orders int64
		if orders, occ, err = s.ordered(s.activities...); err != nil {
			return d, err
		}
		d.Orders, d.Took = orders-orders0, time.Since(start)
	}
	return d, nil
}

// check is the correctness verdict: every accepted ticket became exactly
// one order, no user holds two, the books add up.
type check struct {
	Lines []string
	OK    bool
}

func (s *system) check() check {
	c := check{OK: true}
	fail := func(f string, a ...any) { c.OK = false; c.Lines = append(c.Lines, "FAIL "+fmt.Sprintf(f, a...)) }
	pass := func(f string, a ...any) { c.Lines = append(c.Lines, "ok   "+fmt.Sprintf(f, a...)) }
	for _, a := range s.activities {
		rep, err := s.stock(a)
		if err != nil {
			fail("stock report of activity %d: %v", a, err)
			continue
		}
		for _, k := range rep.SKUs {
			acc, unseen := s.accepted[skuKey{a, k.SKUID}], s.unseen[skuKey{a, k.SKUID}]
			line := fmt.Sprintf("activity %d sku %d: 200 answers %d (+%d answers wrk did not count), orders %d (units %d), occupied %d, remaining %d of %d, drift %d",
				a, k.SKUID, acc, unseen, k.Orders, k.Ordered, k.Occupied, k.Remaining, k.Initial, k.Drift)
			switch {
			case k.Orders < acc || k.Orders > acc+unseen:
				fail("%s: orders must be the accepted tickets (plus at most the uncounted answers)", line)
			case k.Ordered > k.Initial:
				fail("%s: OVERSOLD", line)
			case k.Drift != 0 || k.Occupied != 0:
				fail("%s: the books do not add up", line)
			default:
				pass("%s", line)
			}
		}
	}
	// Count the orders in the database itself: one per (activity, sku,
	// user), one per requestNo.
	dbName := "SQLite"
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.dir, "seckill.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if s.mysqlDSN != "" {
		dbName = "MariaDB"
		db, err = sql.Open("mysql", s.mysqlDSN)
	}
	if err != nil {
		fail("open the orders database: %v", err)
		return c
	}
	defer db.Close()
	var n, users, requests int64
	err = db.QueryRowContext(context.Background(), `SELECT COUNT(*),
		(SELECT COUNT(*) FROM (SELECT DISTINCT activity_id, sku_id, user_id FROM seckill_order) AS d),
		COUNT(DISTINCT request_no) FROM seckill_order`).Scan(&n, &users, &requests)
	var acc, unseen int64
	for k, v := range s.accepted {
		acc += v
		unseen += s.unseen[k]
	}
	switch {
	case err != nil:
		fail("count orders in %s: %v", dbName, err)
	case n < acc || n > acc+unseen || users != n || requests != n:
		fail("%s: %d orders, %d distinct (activity, sku, user), %d distinct requestNo; %d accepted tickets (+%d uncounted)", dbName, n, users, requests, acc, unseen)
	default:
		pass("%s: %d orders = %d accepted tickets + %d of %d answers wrk did not count; all distinct per (activity, sku, user) and per requestNo", dbName, n, acc, n-acc, unseen)
	}
	return c
}

// profiled is what one profile window showed.
type profiled struct {
	cpuTop, allocTop string
	consumerCPU      float64   // CPU seconds in seckill/consumer during the window
	parts            breakdown // the profile's samples by part (breakdown.go)
	bin, base        string    // the binary and the profiles' path prefix, for analyze
	orders           int64     // orders that landed during the window
}

// consumerRowsPerCPUSecond is the consumer's cost per order turned into a
// capacity: orders it could write with one core, at this window's cost.
func (p profiled) consumerRowsPerCPUSecond() float64 {
	if p.consumerCPU <= 0 {
		return 0
	}
	return float64(p.orders) / p.consumerCPU
}

var reShowing = regexp.MustCompile(`Showing nodes accounting for ([\d.]+)(ms|s)`)

// profile fetches a CPU profile of secs seconds and a heap-allocation
// delta over the same window and counts the orders landed in it;
// analyze reads them.
func (s *system) profile(out, name string, secs int) (p profiled) {
	get := func(path, file string) error {
		resp, err := http.Get("http://" + s.pprof + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, resp.Body)
		return err
	}
	base := filepath.Join(out, name)
	_ = get("/debug/pprof/allocs", base+".allocs0.pb.gz")
	orders0, _, _ := s.ordered(s.activities...)
	if err := get("/debug/pprof/profile?seconds="+strconv.Itoa(secs), base+".cpu.pb.gz"); err != nil {
		p.cpuTop = "cpu profile: " + err.Error()
		return p
	}
	orders1, _, _ := s.ordered(s.activities...)
	p.orders = orders1 - orders0
	_ = get("/debug/pprof/allocs", base+".allocs1.pb.gz")
	p.bin, p.base = s.bin, base
	return p
}

// analyze reads the profiles p fetched with go tool pprof: their top
// entries, the consumer's CPU and the split by part. It runs after a cost
// window closes, so the harness' own pprof runs do not lengthen it.
func (p *profiled) analyze() {
	if p.base == "" {
		return
	}
	base := p.base
	top := func(args ...string) string {
		b, err := exec.Command("go", append([]string{"tool", "pprof", "-top"}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Sprintf("pprof: %v\n%s", err, b)
		}
		return string(b)
	}
	p.cpuTop = top("-nodecount=35", p.bin, base+".cpu.pb.gz")
	p.allocTop = top("-nodecount=30", "-sample_index=alloc_objects", "-base", base+".allocs0.pb.gz", p.bin, base+".allocs1.pb.gz")
	_ = os.WriteFile(base+".cpu.top.txt", []byte(p.cpuTop), 0o644)
	_ = os.WriteFile(base+".allocs.top.txt", []byte(p.allocTop), 0o644)
	if v, err := profileSeconds(p.bin, base+".cpu.pb.gz", `^seckill/consumer\.`, ""); err == nil {
		p.consumerCPU = v
	}
	p.parts, _ = splitProfile(p.bin, base+".cpu.pb.gz", devParts)
}

// Idle bounds for waitIdle: the watched processes together use less than
// idleShare of one core over idleWindow, or the wait gives up after
// idleMax and the run goes on (logged).
const (
	idleShare  = 0.05
	idleWindow = time.Second
	idleMax    = 60 * time.Second
)

// waitIdle waits until seckill dev and its redis-servers are idle, so that
// a run measures its own requests and not the catch-up of the run before it
// (the reconciler auditing (a)'s orders, a Redis rewrite). It returns how
// long it waited and the share of a core they used over the last window.
func (s *system) waitIdle() (time.Duration, float64, bool) {
	cpu := func() (time.Duration, error) {
		sn, err := take(s.watch)
		var sum time.Duration
		for _, d := range sn.cpu {
			sum += d
		}
		return sum, err
	}
	return untilIdle(cpu, time.Sleep, idleShare, idleWindow, idleMax)
}

// untilIdle samples cpu (the CPU time used so far) every window until what
// was used over a window is below share of it, or max has passed (idle
// false). A sample that fails ends the wait at once, not idle.
func untilIdle(cpu func() (time.Duration, error), sleep func(time.Duration), share float64, window, max time.Duration) (waited time.Duration, last float64, idle bool) {
	prev, err := cpu()
	if err != nil {
		return 0, 0, false
	}
	for waited < max {
		sleep(window)
		waited += window
		now, err := cpu()
		if err != nil {
			return waited, last, false
		}
		last = float64(now-prev) / float64(window)
		if last < share {
			return waited, last, true
		}
		prev = now
	}
	return waited, last, false
}

// reconcilePasses is how many reconciler passes seckill dev has ended so
// far, by any outcome (seckill_reconcile_runs_total on its /metrics). A
// scrape costs seckill a few milliseconds (its collectors, the encoding),
// so it asks for the text uncompressed and waitPass asks seldom.
func (s *system) reconcilePasses() (float64, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+s.edge+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("/metrics: %s", resp.Status)
	}
	return runsTotal(resp.Body)
}

// runsTotal sums seckill_reconcile_runs_total over its outcomes in a
// Prometheus text exposition (0 when it is not there yet).
func runsTotal(in io.Reader) (float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(in)
	if err != nil {
		return 0, fmt.Errorf("/metrics: %w", err)
	}
	var n float64
	if f := fams["seckill_reconcile_runs_total"]; f != nil {
		for _, m := range f.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

// catchUpMax bounds waitPass: the reconciler's interval (make run's 1m)
// and some slack. passPoll is how often it reads the passes: a pass ends
// at most that long before the wait does.
const (
	catchUpMax = 75 * time.Second
	passPoll   = 2 * time.Second
)

// waitPass waits until seckill dev's reconciler has ended more passes than
// since (its audit of the orders made before that pass began is then
// done), at most max, and says whether one ended.
func (s *system) waitPass(since float64, max time.Duration) bool {
	for start := time.Now(); time.Since(start) < max; time.Sleep(passPoll) {
		if n, err := s.reconcilePasses(); err == nil && n > since {
			return true
		}
	}
	return false
}
