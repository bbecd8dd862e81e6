// Command queue measures queue mode against direct purchases in one run
// of `seckill dev` (configs/bench.yaml, queue mode on): how many purchase
// attempts a queued SKU takes per second (202 WAITING) against the direct
// SKU's accepts per second (200 QUEUING) from the same clients, the Redis
// CPU per buyer in each mode (for a queued buyer: the edge's waiting
// record and WAITING result, the drainer's result check, occupy and
// removal of the waiting record, the consumer's claim and result), and the
// drain rate of a full line: the queued SKU's line is held at 1 attempt/s
// while it fills, so that intake and drain are measured apart, then let
// go. Every ratio is taken against direct in the same run, so a busy
// machine moves the absolute rates more than the ratios.
//
//	go run ./bench/queue                 # 3,000 buyers per mode, 32 clients
//	go run ./bench/queue -n 10000 -c 64
//
// Both SKUs are ordinary (not hot), so both modes are on the default
// redis-server, the one whose CPU is read (INFO cpu). The
// drain is read from the drainer's seckill_queue_decided_total on
// /metrics, not from Redis, which would add to the CPU measured. Every
// request goes to 127.0.0.1; every process it starts is stopped by its
// PID (seckill dev stops its own servers).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"seckill/admin"
	adminclient "seckill/admin/client"
	"seckill/bench/benchkit"
	"seckill/internal/testenv"
	"seckill/sale"
)

const adminToken = "bench-queue-token"

const (
	directSKU = 4001
	queuedSKU = 4002
)

func main() {
	n := flag.Int("n", 3000, "buyers per mode (each buys once)")
	conns := flag.Int("c", 32, "concurrent HTTP clients")
	out := flag.String("out", "bench/out/queue", "work directory: binary, data, logs, queue.md")
	flag.Parse()
	var dev *testenv.Dev
	benchkit.Main("queue", func() error {
		return run(*n, *conns, *out, &dev)
	}, func() {
		if dev != nil {
			dev.Stop(syscall.SIGTERM, time.Minute)
		}
	})
}

func run(n, conns int, outDir string, devp **testenv.Dev) error {
	out, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	data := filepath.Join(out, "data")
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(out, "seckill")
	if err := testenv.BuildSeckill(bin, false); err != nil {
		return err
	}
	edge, adm := benchkit.FreeAddr(), benchkit.FreeAddr()
	env := append(testenv.CleanEnv(), "SECKILL_ADMIN_TOKEN="+adminToken, "SECKILL_DEV_DEMO=false",
		"SECKILL_ENGINE_QUEUE_ENABLED=true", "SECKILL_ENGINE_QUEUE_SESSION_TIMEOUT=6s",
		// The latency budgets past which a slow call is 503: a busy
		// two-core machine now and then passes 500ms, and every
		// attempt must be answered for the figures to count it.
		"SECKILL_EDGE_REDIS_TIMEOUT=2s", "SECKILL_ENGINE_OCCUPY_TIMEOUT=2s",
		// Measure the path, not the admission gate.
		"SECKILL_EDGE_RATE_GATE_FLOOR=1000000")
	dev := testenv.NewDev(bin, filepath.Join(out, "seckill-dev.log"), edge,
		[]string{"--config", "configs/bench.yaml", "--data-dir", data, "--listen", edge, "--admin-listen", adm}, env)
	*devp = dev
	if err := dev.Start(); err != nil {
		return err
	}
	if _, err := dev.AwaitReady(2 * time.Minute); err != nil {
		return err
	}
	client := &http.Client{Timeout: 15 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	api := adminclient.New("http://"+adm, adminToken, nil)
	ctx := context.Background()
	now := time.Now()
	a := sale.Activity{ID: 1, Start: now.Add(-time.Minute).Truncate(time.Second), End: now.Add(time.Hour).Truncate(time.Second),
		State: sale.StateOnline, SKUs: []sale.SKU{
			{ID: directSKU, Stock: int64(n) + 1, Price: 100, LimitPerUser: 1},
			{ID: queuedSKU, Stock: int64(n), Price: 100, LimitPerUser: 1, Mode: sale.ModeQueue}}}
	if _, err := api.CreateActivity(ctx, a); err != nil {
		return fmt.Errorf("create the sale: %w", err)
	}
	order := "http://" + edge + "/api/v1/flash-sale/order"
	// The edge learns the sale at its next catalog refresh; the probe
	// buys the direct SKU's one unit over n.
	if err := await(30*time.Second, 100*time.Millisecond, "the edge to sell SKU 4001", func() error {
		code, _, err := buy(client, order, directSKU, 1)
		if err == nil && code != "QUEUING" {
			err = fmt.Errorf("answer %s", code)
		}
		return err
	}); err != nil {
		return err
	}

	redis := dev.Redis()[0]
	cpu := func() time.Duration { c, _ := testenv.RedisCPU(redis); return c }
	if _, err := testenv.RedisCPU(redis); err != nil {
		return err
	}
	cpu0 := cpu()
	direct, _, err := crowd(client, order, conns, n, directSKU, 1_000_000, "QUEUING")
	if err != nil {
		return err
	}
	// The direct buyers' orders written (the consumer's claims and
	// results are theirs), so that none of their work falls in the
	// queue's window.
	if err := awaitOrdered(ctx, api, directSKU, int64(n)+1); err != nil {
		return err
	}
	cpu1 := cpu()
	// The line held while it fills, then let go: the drain rate is the
	// shard's, not the intake's.
	if err := setRate(ctx, api, 1); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	decided0, err := decided(client, edge, "")
	if err != nil {
		return err
	}
	queued, taken, err := crowd(client, order, conns, n, queuedSKU, 2_000_000, "WAITING")
	if err != nil {
		return err
	}
	if err := setRate(ctx, api, 0); err != nil {
		return err
	}
	let := time.Now()
	var drained time.Time
	if err := await(2*time.Minute, 20*time.Millisecond, "the line drained", func() error {
		d, err := decided(client, edge, "")
		if err == nil && d-decided0 < float64(taken) {
			err = fmt.Errorf("%.0f of %d decided", d-decided0, taken)
		}
		drained = time.Now()
		return err
	}); err != nil {
		return err
	}
	if err := awaitOrdered(ctx, api, queuedSKU, int64(n)); err != nil {
		return err
	}
	cpu2 := cpu()
	ok, err := decided(client, edge, "ok")
	if err != nil {
		return err
	}
	drain := drained.Sub(let)

	f := figures{
		n: n, conns: conns, load: benchkit.LoadAvg(), at: time.Now().UTC(),
		direct: float64(n) / direct.Seconds(), taken: float64(n) / queued.Seconds(),
		directCPU: float64((cpu1 - cpu0).Microseconds()) / float64(n),
		queuedCPU: float64((cpu2 - cpu1).Microseconds()) / float64(n),
		drained:   ok, drain: drain, drainRate: float64(n) / drain.Seconds(),
	}
	report := f.String()
	fmt.Print(report)
	return os.WriteFile(filepath.Join(out, "queue.md"), []byte(report), 0o644)
}

type figures struct {
	n, conns             int
	load                 string
	at                   time.Time
	direct, taken        float64 // answers per second
	directCPU, queuedCPU float64 // Redis CPU µs per buyer
	drained              float64 // attempts decided ok
	drain                time.Duration
	drainRate            float64
}

func (f figures) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, load average %s, %d CPUs: %d buyers per mode, %d HTTP clients, `seckill dev` (configs/bench.yaml, queue mode on)\n\n",
		f.at.Format("2006-01-02 15:04 MST"), f.load, runtime.NumCPU(), f.n, f.conns)
	fmt.Fprintf(&b, "direct: %.0f accepted/s (200 QUEUING); Redis CPU %.1f µs per accepted buyer\n", f.direct, f.directCPU)
	fmt.Fprintf(&b, "queue:  %.0f taken/s (202 WAITING) = %.2f × direct; Redis CPU %.1f µs per queued buyer (waiting record, WAITING result, drained occupy, consumer)\n",
		f.taken, f.taken/f.direct, f.queuedCPU)
	fmt.Fprintf(&b, "line:   %.0f decided ok; the full line drained in %v: %.0f attempts/s (%.2f × direct accepts/s)\n\n",
		f.drained, f.drain.Round(time.Millisecond), f.drainRate, f.drainRate/f.direct)
	b.WriteString("| direct accepts/s | queue attempts taken/s | taken ÷ direct | Redis CPU µs / accepted direct | Redis CPU µs / queued buyer | full line drain /s | drain ÷ direct |\n")
	b.WriteString("|---:|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&b, "| %.0f | %.0f | %.2f | %.1f | %.1f | %.0f | %.2f |\n",
		f.direct, f.taken, f.taken/f.direct, f.directCPU, f.queuedCPU, f.drainRate, f.drainRate/f.direct)
	return b.String()
}

// setRate sets the queued SKU's drain rate (attempts per second; 0: as
// fast as the shard allows).
func setRate(ctx context.Context, api *adminclient.Client, rate int64) error {
	_, err := api.SetMode(ctx, queuedSKU, admin.ModeChange{ActivityID: 1, Rate: &rate})
	return err
}

// awaitOrdered waits until the SKU's units in orders (the database) reach
// want.
func awaitOrdered(ctx context.Context, api *adminclient.Client, sku, want int64) error {
	return await(2*time.Minute, 50*time.Millisecond, fmt.Sprintf("%d units of SKU %d ordered", want, sku), func() error {
		rep, err := api.Stock(ctx, 1)
		if err != nil {
			return err
		}
		for _, k := range rep.SKUs {
			if k.SKUID == sku && k.Ordered >= want {
				return nil
			} else if k.SKUID == sku {
				return fmt.Errorf("%d ordered", k.Ordered)
			}
		}
		return fmt.Errorf("no SKU %d in the stock report", sku)
	})
}

// crowd sends n purchases of sku, one per buyer base+i, from conns
// clients, and returns the time they took and how many answered want; any
// other answer is an error (a 429 is retried after a second, as a buyer
// would).
func crowd(c *http.Client, order string, conns, n int, sku, base int64, want string) (time.Duration, int, error) {
	var ok atomic.Int64
	var mu sync.Mutex
	var errs []error
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			for i := range work {
				code, status, err := buy(c, order, sku, base+int64(i))
				for try := 0; err == nil && status == http.StatusTooManyRequests && try < 30; try++ {
					time.Sleep(time.Second)
					code, status, err = buy(c, order, sku, base+int64(i))
				}
				if err == nil && code != want {
					err = fmt.Errorf("buyer %d: %d %s, want %s", base+int64(i), status, code, want)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				ok.Add(1)
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	took := time.Since(start)
	if len(errs) > 0 {
		return took, int(ok.Load()), fmt.Errorf("sku %d: %d of %d not %s, the first: %w", sku, len(errs), n, want, errs[0])
	}
	return took, int(ok.Load()), nil
}

// buy sends one purchase and returns the answer's code and status.
func buy(c *http.Client, order string, sku, user int64) (code string, status int, err error) {
	req, _ := http.NewRequest("POST", order, strings.NewReader(`{"skuId":`+strconv.FormatInt(sku, 10)+`,"quantity":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-Id", strconv.FormatInt(user, 10))
	resp, err := c.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Code string `json:"code"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &body); err != nil {
		return "", resp.StatusCode, fmt.Errorf("answer %d %q: %w", resp.StatusCode, b, err)
	}
	return body.Code, resp.StatusCode, nil
}

var decidedRe = regexp.MustCompile(`(?m)^seckill_queue_decided_total\{([^}]*)\} ([0-9.e+]+)$`)

// decided sums seckill_queue_decided_total on the edge's /metrics, of
// every outcome or of the one named.
func decided(c *http.Client, edge, outcome string) (float64, error) {
	resp, err := c.Get("http://" + edge + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, m := range decidedRe.FindAllStringSubmatch(string(b), -1) {
		if outcome != "" && !strings.Contains(m[1], `outcome="`+outcome+`"`) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum, nil
}

// await polls check every interval until it returns nil or timeout
// passes.
func await(timeout, interval time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s after %v: %w", what, timeout, err)
		}
		time.Sleep(interval)
	}
}
