// Command restart measures how long `seckill dev` and the servers it brings
// along take to start again on a data directory after a sale of a given
// size: for each size it sells that many tickets with wrk and
// bench/flash_sale_unique.lua, waits until every ticket is an order, records
// the data directory's size per server, then times
//
//   - `seckill dev` restarted after SIGTERM (a clean stop), until /readyz
//     answers 200, and its own per-dependency waits;
//   - each server alone on the stopped directory, as the separate
//     processes meet them: redis-server until it stops answering LOADING
//     (default and hot shard), the broker until it serves (with the
//     snapshot a clean stop writes, and without it, as after a crash),
//     the SQLite store's open and migration;
//   - `seckill dev` restarted after a SIGKILL of its whole process group.
//
// Every request goes to 127.0.0.1. Every process it starts is stopped by
// its PID (the dev process group by its group id, which it created).
//
//	go run ./bench/restart -tickets 10000,250000,1000000
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"seckill/admin"
	"seckill/bench/benchkit"
	"seckill/cmd/seckill/devserver"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/store"
)

const adminToken = "bench-restart-token"

// The sale: the demo's activity id and SKU, which flash_sale_unique.lua
// buys, with as many units as tickets are wanted; hot, so that both
// redis-servers hold part of it, as in the report.
const (
	activityID = 1
	skuID      = 1001
)

func main() {
	sizes := flag.String("tickets", "10000,250000,1000000", "comma-separated sale sizes (tickets)")
	out := flag.String("out", "bench/out/restart", "work directory: binary, data directories, logs, restart.md")
	config := flag.String("config", "configs/bench.yaml", "seckill dev configuration")
	bin := flag.String("bin", "", "seckill binary to run (default: build ./cmd/seckill into -out)")
	keep := flag.Bool("keep", false, "keep each size's data directory")
	flag.Parse()
	if err := run(*sizes, *out, *config, *bin, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "restart:", err)
		stopAll()
		os.Exit(1)
	}
}

func run(sizes, out, config, bin string, keep bool) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() { <-sig; stopAll(); os.Exit(130) }()
	if bin == "" {
		bin = filepath.Join(out, "seckill")
		if err := testenv.BuildSeckill(bin, false); err != nil {
			return err
		}
	}
	var rows []result
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-tickets: %q is not a positive number", s)
		}
		r, err := measure(out, bin, config, n, keep)
		if err != nil {
			return fmt.Errorf("%d tickets: %w", n, err)
		}
		rows = append(rows, r)
		fmt.Println(r.line())
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s, load average %s, %d CPUs (`go run ./bench/restart -tickets %s`)\n\n",
		time.Now().UTC().Format("Mon, 2 Jan 2006 15:04 MST"), benchkit.LoadAvg(), runtime.NumCPU(), sizes)
	b.WriteString(header)
	for _, r := range rows {
		b.WriteString(r.line() + "\n")
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString(r.detail())
	}
	fmt.Print("\n" + b.String())
	return os.WriteFile(filepath.Join(out, "restart.md"), []byte(b.String()), 0o644)
}

// result is one sale size's figures.
type result struct {
	Tickets        int
	Sale           time.Duration // selling every unit
	Drain          time.Duration // then until every ticket is an order
	Sizes          sizes         // data directory after the drain, before the stop
	Stopped        sizes         // after SIGTERM
	StopTook       time.Duration // SIGTERM until exit
	DevClean       time.Duration // seckill dev after SIGTERM: exec to /readyz 200
	DevCleanWaits  string        // its "dependency ready" lines
	RedisDefault   time.Duration // redis-server alone until not LOADING
	RedisHot       time.Duration
	BrokerClean    time.Duration // the broker alone, with its snapshot
	BrokerCrash    time.Duration // the broker alone, without it (as after SIGKILL)
	StoreOpen      time.Duration // store.Open (SQLite open + migrate) and one row read
	DevKill        time.Duration // seckill dev after SIGKILL of its group
	DevKillWaits   string
	AOF            [2]string // INFO persistence of both Redis after the drain
	Orders, Remain int64
	Resold         int64 // units a failed ticket gave back, sold again
}

const header = "| tickets | sale | data dir | redis (default + hot) | broker log | SQLite | per 1M tickets | dev restart after SIGTERM | after SIGKILL | redis-server load (default / hot) | broker start (snapshot / none) | SQLite open + migrate |\n" +
	"|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"

func (r result) line() string {
	total := r.Stopped.total()
	return fmt.Sprintf("| %d | %v | %s | %s | %s | %s | %s | %v | %v | %v / %v | %v / %v | %v |",
		r.Tickets, r.Sale.Round(time.Second), mb(total), mb(r.Stopped.Redis+r.Stopped.RedisHot), mb(r.Stopped.Kafka), mb(r.Stopped.SQLite),
		mb(int64(float64(total)*1e6/float64(r.Tickets))),
		ms(r.DevClean), ms(r.DevKill), ms(r.RedisDefault), ms(r.RedisHot), ms(r.BrokerClean), ms(r.BrokerCrash), ms(r.StoreOpen))
}

func (r result) detail() string {
	return fmt.Sprintf("- %d tickets: sold in %v, drained %v later (%d orders, %d units left, %d units given back by failed tickets and sold again); before the stop: %s; after SIGTERM (stop took %v): %s\n"+
		"  - Redis after the drain: default %s; hot %s\n"+
		"  - dev after SIGTERM waited for: %s\n  - dev after SIGKILL waited for: %s\n",
		r.Tickets, r.Sale.Round(time.Millisecond), r.Drain.Round(time.Millisecond), r.Orders, r.Remain, r.Resold, r.Sizes, ms(r.StopTook), r.Stopped,
		r.AOF[0], r.AOF[1], r.DevCleanWaits, r.DevKillWaits)
}

func ms(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// sizes is a data directory's bytes per server.
type sizes struct{ Redis, RedisHot, Kafka, SQLite, Other int64 }

func (s sizes) total() int64 { return s.Redis + s.RedisHot + s.Kafka + s.SQLite + s.Other }

func (s sizes) String() string {
	return fmt.Sprintf("redis %s, redis-hot %s, kafka %s, sqlite %s (total %s)", mb(s.Redis), mb(s.RedisHot), mb(s.Kafka), mb(s.SQLite), mb(s.total()))
}

func measureSizes(dir string) (sizes, error) {
	var s sizes
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		switch top, _, _ := strings.Cut(rel, string(filepath.Separator)); {
		case top == "redis" && !strings.HasSuffix(rel, ".log"):
			s.Redis += info.Size()
		case top == "redis-hot" && !strings.HasSuffix(rel, ".log"):
			s.RedisHot += info.Size()
		case top == "kafka":
			s.Kafka += info.Size()
		case strings.HasPrefix(top, "seckill.db"):
			s.SQLite += info.Size()
		case !strings.HasSuffix(rel, ".log"):
			s.Other += info.Size()
		}
		return nil
	})
	return s, err
}

func measure(out, bin, config string, n int, keep bool) (result, error) {
	r := result{Tickets: n}
	dir, err := filepath.Abs(filepath.Join(out, fmt.Sprintf("data-%d", n)))
	if err != nil {
		return r, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return r, err
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	logs := filepath.Join(out, fmt.Sprintf("logs-%d", n))
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return r, err
	}
	d := newDev(bin, config, dir, logs, &http.Client{Timeout: 30 * time.Second})

	// The sale.
	if _, err := d.start("sale", "warn"); err != nil {
		return r, err
	}
	now := time.Now()
	a := sale.Activity{ID: activityID, Start: now.Add(-time.Second).Truncate(time.Second), End: now.Add(6 * time.Hour).Truncate(time.Second),
		State: sale.StateOnline, SKUs: []sale.SKU{{ID: skuID, Stock: int64(n), Price: 9900, LimitPerUser: 1, Hot: true}}}
	if err := d.call("POST", "/admin/v1/activities", a, nil); err != nil {
		return r, fmt.Errorf("create the sale: %w", err)
	}
	if err := d.waitSelling(15 * time.Second); err != nil {
		return r, err
	}
	// Sell until Redis has nothing left, then wait until every ticket is an
	// order. A ticket that fails (a send that timed out on a busy machine,
	// an orphan the sweeper releases) gives its unit back: sell again
	// until every unit is an order.
	saleStart := time.Now()
	var drainStart time.Time
	for {
		for {
			left, err := d.remaining()
			if err != nil {
				return r, err
			}
			if left == 0 {
				break
			}
			if time.Since(saleStart) > 30*time.Minute {
				return r, fmt.Errorf("still %d units left after %v", left, time.Since(saleStart))
			}
			// wrk exits when its time is up; the loop asks again whether
			// anything is left.
			secs := max(3, min(20, int(left/8000)+1))
			cmd := exec.Command("wrk", "-t2", "-c256", fmt.Sprintf("-d%ds", secs), "-s", "bench/flash_sale_unique.lua",
				"http://"+d.Edge+"/api/v1/flash-sale/order")
			if b, err := cmd.CombinedOutput(); err != nil {
				return r, fmt.Errorf("wrk: %v\n%s", err, b)
			}
		}
		if r.Sale == 0 {
			r.Sale = time.Since(saleStart)
			drainStart = time.Now()
		}
		k, err := d.stock()
		for err == nil && k.Occupied > 0 {
			if time.Since(drainStart) > 10*time.Minute {
				return r, fmt.Errorf("not drained after 10m: %+v", k)
			}
			time.Sleep(200 * time.Millisecond)
			k, err = d.stock()
		}
		if err != nil {
			return r, err
		}
		if k.Orders == int64(n) {
			r.Orders, r.Remain = k.Orders, k.Remaining
			break
		}
		if k.Remaining == 0 {
			return r, fmt.Errorf("drift: nothing left, nothing occupied, but %d orders of %d: %+v", k.Orders, n, k)
		}
		r.Resold += k.Remaining
	}
	r.Drain = time.Since(drainStart)
	// Let the broker's trim (every 5s) and Redis' fsync (every second)
	// catch up, as a sale that has been quiet for a moment would.
	time.Sleep(6 * time.Second)
	r.AOF[0], r.AOF[1] = aofInfo(d.Redis()[0]), aofInfo(d.Redis()[1])
	if r.Sizes, err = measureSizes(dir); err != nil {
		return r, err
	}
	t0 := time.Now()
	if err := d.stop(syscall.SIGTERM); err != nil {
		return r, err
	}
	r.StopTook = time.Since(t0)
	if r.Stopped, err = measureSizes(dir); err != nil {
		return r, err
	}

	// Each server alone, on the stopped directory.
	if r.RedisDefault, err = redisLoad(filepath.Join(dir, "redis")); err != nil {
		return r, err
	}
	if r.RedisHot, err = redisLoad(filepath.Join(dir, "redis-hot")); err != nil {
		return r, err
	}
	crashCopy := filepath.Join(out, "kafka-no-snapshot")
	_ = os.RemoveAll(crashCopy)
	if err := exec.Command("cp", "-a", filepath.Join(dir, "kafka"), crashCopy).Run(); err != nil {
		return r, err
	}
	if r.BrokerClean, err = brokerStart(filepath.Join(dir, "kafka")); err != nil {
		return r, err
	}
	snaps, _ := filepath.Glob(filepath.Join(crashCopy, "partitions", "*", "snapshot.json"))
	for _, s := range snaps {
		_ = os.Remove(s)
	}
	if r.BrokerCrash, err = brokerStart(crashCopy); err != nil {
		return r, err
	}
	_ = os.RemoveAll(crashCopy)
	if r.StoreOpen, err = storeOpen(filepath.Join(dir, "seckill.db")); err != nil {
		return r, err
	}

	// seckill dev after a clean stop, then after SIGKILL.
	if r.DevClean, err = d.start("after-sigterm", "info"); err != nil {
		return r, err
	}
	r.DevCleanWaits = d.waits()
	if err := d.stop(syscall.SIGKILL); err != nil {
		return r, err
	}
	if r.DevKill, err = d.start("after-sigkill", "info"); err != nil {
		return r, err
	}
	r.DevKillWaits = d.waits()
	return r, d.stop(syscall.SIGTERM)
}

// dev is one data directory's `seckill dev` (testenv.Dev: a process group
// of its own, so that SIGKILL reaches its redis-server children too); its
// log, every start of it, is in logs/dev.log.
type dev struct {
	*testenv.Dev
	config, dir, admin string
	http               *http.Client
}

func newDev(bin, config, dir, logs string, client *http.Client) *dev {
	edge := freeAddr()
	d := &dev{config: config, dir: dir, admin: freeAddr(), http: client}
	d.Dev = testenv.NewDev(bin, filepath.Join(logs, "dev.log"), edge,
		[]string{"--config", config, "--data-dir", dir, "--listen", edge, "--admin-listen", d.admin}, nil)
	return d
}

var running []*dev

func stopAll() {
	for _, d := range running {
		_ = d.stop(syscall.SIGKILL)
	}
}

// start runs seckill dev (the run named name in its log) at log level
// level and returns the time from exec until /readyz answers 200.
func (d *dev) start(name, level string) (time.Duration, error) {
	d.Name = "seckill dev " + name
	d.Env = append(os.Environ(), "SECKILL_ADMIN_TOKEN="+adminToken, "SECKILL_DEV_DEMO=false", "SECKILL_LOG_LEVEL="+level,
		"SECKILL_START_TIMEOUT=10m")
	t0 := time.Now()
	if err := d.Start(); err != nil {
		return 0, err
	}
	running = append(running, d)
	if _, err := d.AwaitReady(10 * time.Minute); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// stop signals the whole process group (SIGKILL) or the process (SIGTERM)
// and waits for it and its redis-servers' ports to close.
func (d *dev) stop(sig syscall.Signal) error {
	if sig == syscall.SIGKILL {
		d.KillGroup()
		return nil
	}
	if d.Stop(sig, 5*time.Minute) {
		return fmt.Errorf("seckill dev ignored %v for 5 minutes", sig)
	}
	return nil
}

// readyLine is the start-up wait's line for a dependency it waited for, in
// the JSON (bench.yaml) or the console format.
var readyLine = regexp.MustCompile(`"?dependency ready"?[,\s]+\{?"dependency": ?"([^"]+)", ?"waited": ?"?([^",}]+)`)

// waits lists the dependency waits of the last start.
func (d *dev) waits() string {
	b := []byte(d.SinceStart())
	var out []string
	for _, m := range readyLine.FindAllSubmatch(b, -1) {
		w := string(m[2])
		if f, err := strconv.ParseFloat(w, 64); err == nil { // JSON: seconds
			w = ms(time.Duration(f * float64(time.Second)))
		}
		out = append(out, string(m[1])+" "+w)
	}
	if len(out) == 0 {
		return "nothing (every dependency answered at once)"
	}
	return strings.Join(out, ", ")
}

func (d *dev) call(method, path string, in, out any) error {
	return benchkit.Admin{Addr: d.admin, Token: adminToken, HTTP: d.http}.Call(method, path, in, out)
}

// remaining is the SKU's stock in Redis (the hot shard).
func (d *dev) remaining() (int64, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{d.Redis()[1]}, DisableCache: true})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, c.B().Get().Key(sale.KeysFor(activityID, skuID).Stock).Build()).AsInt64()
}

// stock is the SKU's line of the admin stock report. The report counts
// the orders in SQLite, which a busy machine may not answer within the
// admin API's bound: it is asked again, up to ten times.
func (d *dev) stock() (admin.SKUStock, error) {
	var rep admin.StockReport
	var err error
	for range 10 {
		if err = d.call("GET", fmt.Sprintf("/admin/v1/activities/%d/stock", activityID), nil, &rep); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		return admin.SKUStock{}, err
	}
	for _, k := range rep.SKUs {
		if k.SKUID == skuID {
			return k, nil
		}
	}
	return admin.SKUStock{}, fmt.Errorf("no SKU %d in the stock report", skuID)
}

// waitSelling waits until the edge has loaded the new activity.
func (d *dev) waitSelling(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		resp, err := d.http.Get(fmt.Sprintf("http://%s/api/v1/flash-sale/activities/%d", d.Edge, activityID))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge does not show activity %d", activityID)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// aofInfo is one Redis' append-only file and memory figures.
func aofInfo(addr string) string {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var parts []string
	for _, section := range []string{"persistence", "memory", "keyspace"} {
		s, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
		if err != nil {
			return err.Error()
		}
		for _, l := range strings.Split(s, "\r\n") {
			k, v, _ := strings.Cut(l, ":")
			switch k {
			case "aof_current_size", "aof_base_size", "aof_rewrites", "used_memory_human", "db0":
				parts = append(parts, k+"="+v)
			}
		}
	}
	return strings.Join(parts, " ")
}

// redisLoad starts redis-server as seckill dev does on dir and times it
// until it answers PING with PONG instead of LOADING.
func redisLoad(dir string) (time.Duration, error) {
	t0 := time.Now()
	r, err := devserver.StartRedis(dir, 0)
	if err != nil {
		return 0, err
	}
	defer r.Stop()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true, DisableRetry: true})
	for err != nil && strings.Contains(err.Error(), "LOADING") {
		time.Sleep(10 * time.Millisecond)
		c, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true, DisableRetry: true})
	}
	if err != nil {
		return 0, err
	}
	defer c.Close()
	for {
		err := c.Do(context.Background(), c.B().Ping().Build()).Error()
		if err == nil {
			return time.Since(t0), nil
		}
		if !strings.Contains(err.Error(), "LOADING") {
			return 0, err
		}
		if time.Since(t0) > 10*time.Minute {
			return 0, errors.New("redis-server still loading after 10m")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// brokerStart times the embedded broker's start on dir (the log read
// back) and stops it again.
func brokerStart(dir string) (time.Duration, error) {
	t0 := time.Now()
	k, err := devserver.StartKafka(devserver.KafkaConfig{Dir: dir, Partitions: 1})
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	k.Stop()
	return took, nil
}

// storeOpen times store.Open (open and migrate) plus one read of a row
// (the SKU's stock snapshot) on the SQLite file.
func storeOpen(path string) (time.Duration, error) {
	t0 := time.Now()
	cfg := store.DefaultConfig()
	cfg.DSN = path
	s, err := store.Open(cfg)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.Snapshot(ctx, activityID, skuID); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func freeAddr() string {
	port, err := devserver.FreePort()
	if err != nil {
		panic(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}
