// Command soak runs one long sale against `seckill dev` and watches every
// process for growth: wrk at full speed with bench/soak.lua (a pool of
// distinct buyer ids, 10 million by default) and the seed's
// bench/flash_sale.lua alongside, one restock a minute, and every sample
// interval the RSS, threads and open file descriptors of each process
// (seckill and its redis-servers), the Go heap and goroutines (from
// /metrics), each Redis's used_memory and user records, the data
// directory's size, and the edge's gauges of sizes (entries, holders…).
// It writes soak.csv and soak.png (one line per process's RSS) and two
// heap profiles of seckill into -out, and fails when a Go process's RSS
// grows more than 10% from the sample at -warmup (two tenths of the run
// by default: minute 2 of 10) to the last, or any process's RSS passes
// twice its median after half of -warmup.
// Redis grows by design with every buyer who holds a ticket (the record
// of the ledger, until the sale's keys expire): its per-record cost is
// reported, not judged. After the sale it waits until every ticket is an
// order and checks the books in the real stores (books.go): it fails when
// they do not add up.
//
//	go run ./bench/soak                  # 10 minutes (the figure)
//	go run ./bench/soak -duration 110s -warmup 50s # make test's: 60 s judged
//
// Every request goes to 127.0.0.1; every process it starts is stopped by
// its PID.
package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"seckill/bench/benchkit"
	"seckill/sale"
)

const adminToken = "bench-soak-token"

func main() {
	dur := flag.Duration("duration", 10*time.Minute, "how long the sale runs")
	buyers := flag.Int("buyers", 10_000_000, "distinct buyer ids bench/soak.lua cycles through")
	every := flag.Duration("sample", 0, "sample interval (default duration/60, at least 1s)")
	restock := flag.Duration("restock", 0, "restock interval (default 1m, or duration/6 for runs under 6m)")
	stock := flag.Int64("stock", 200_000, "units at the start; each restock adds as many again / 10")
	conns := flag.Int("c", 256, "wrk connections (soak.lua)")
	out := flag.String("out", "bench/out/soak", "work directory: binary, data, logs, soak.csv, soak.png")
	warmup := flag.Duration("warmup", 0, "the growth rule's baseline: the first sample at or after it (default two tenths of the run: minute 2 of 10); the median is of the samples after half of it")
	heaps := flag.Bool("heap", true, "save seckill's heap profile (in use, after a GC) at -warmup and at the end, for go tool pprof -diff_base")
	flag.Parse()
	if *every == 0 {
		*every = max(time.Second, *dur/60)
	}
	if *warmup == 0 {
		*warmup = *dur / 5
	}
	if *restock == 0 {
		*restock = time.Minute
		if *dur < 6*time.Minute {
			*restock = *dur / 6
		}
	}
	benchkit.Main("soak", func() error {
		return run(config{dur: *dur, buyers: *buyers, every: *every, restock: *restock, stock: *stock, conns: *conns, out: *out, heaps: *heaps, warmup: *warmup})
	}, benchkit.StopAll)
}

type config struct {
	dur, every, restock time.Duration
	warmup              time.Duration // judge's baseline
	buyers, conns       int
	stock               int64
	out                 string
	heaps               bool
}

func run(c config) error {
	out, err := filepath.Abs(c.out)
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
	if _, err := benchkit.RaiseFileLimit(); err != nil {
		return err
	}
	bin := filepath.Join(out, "seckill")
	if b, err := exec.Command("go", "build", "-o", bin, "./cmd/seckill").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, b)
	}
	edge, adm, prof := benchkit.FreeAddr(), benchkit.FreeAddr(), benchkit.FreeAddr()
	args := []string{"dev", "--config", "configs/bench.yaml", "--data-dir", data, "--listen", edge, "--admin-listen", adm}
	if c.heaps {
		args = append(args, "--pprof", prof)
	}
	dev, err := benchkit.Start(out, "seckill-dev", bin, []string{"SECKILL_ADMIN_TOKEN=" + adminToken, "SECKILL_DEV_DEMO=false"}, args...)
	if err != nil {
		return err
	}
	if err := benchkit.WaitReady(dev, "http://"+edge+"/readyz", 2*time.Minute); err != nil {
		return err
	}
	redis, err := redisAddrs(dev.Log)
	if err != nil {
		return err
	}
	admin := benchkit.Admin{Addr: adm, Token: adminToken, HTTP: &http.Client{Timeout: 30 * time.Second}}
	now := time.Now()
	a := sale.Activity{ID: 1, Start: now.Add(-time.Second).Truncate(time.Second), End: now.Add(c.dur + time.Hour).Truncate(time.Second),
		State: sale.StateOnline, SKUs: []sale.SKU{{ID: 1001, Stock: c.stock, Price: 9900, LimitPerUser: 1, Hot: true}}}
	if err := admin.Call("POST", "/admin/v1/activities", a, nil); err != nil {
		return fmt.Errorf("create the sale: %w", err)
	}
	time.Sleep(3 * time.Second) // the edge's catalog refresh

	procs := []proc{{name: "seckill", pid: dev.PID(), metrics: "http://" + edge + "/metrics"}}
	for i, addr := range redis {
		pid, err := benchkit.RedisPID(addr)
		if err != nil {
			return err
		}
		procs = append(procs, proc{name: []string{"redis", "redis-hot"}[i], pid: pid, redis: addr})
	}

	var wg sync.WaitGroup
	loads := make([]benchkit.WrkResult, 2)
	errs := make([]error, 2)
	order := "http://" + edge + "/api/v1/flash-sale/order"
	wg.Go(func() {
		loads[0], errs[0] = benchkit.RunWrk(out, "soak", benchkit.Load{Threads: 2, Conns: c.conns, Dur: c.dur, Timeout: 5 * time.Second,
			Script: "bench/soak.lua", URL: order, Args: []string{strconv.Itoa(c.buyers), "2"}})
	})
	wg.Go(func() {
		loads[1], errs[1] = benchkit.RunWrk(out, "flash_sale", benchkit.Load{Threads: 1, Conns: 8, Dur: c.dur, Timeout: 5 * time.Second,
			Script: "bench/flash_sale.lua", URL: order})
	})
	var samples []sample
	t0 := time.Now()
	nextRestock := t0.Add(c.restock)
	restocks := 0
	for at := t0; time.Since(t0) < c.dur; {
		at = at.Add(c.every)
		time.Sleep(time.Until(at))
		if !time.Now().Before(nextRestock) && time.Since(t0) < c.dur {
			nextRestock = nextRestock.Add(c.restock)
			body := map[string]int64{"units": max(c.stock/10, 1), "activityId": 1}
			if err := admin.Call("POST", "/admin/v1/skus/1001/restock", body, nil); err != nil {
				fmt.Fprintln(os.Stderr, "soak: restock:", err)
			} else {
				restocks++
			}
		}
		s := take(time.Since(t0), procs, data)
		samples = append(samples, s)
		fmt.Println(s.line(procs))
		if c.heaps && (len(samples) == 1 || samples[len(samples)-2].at < c.warmup) && s.at >= c.warmup {
			saveHeap(prof, filepath.Join(out, "heap-early.pb.gz"))
		}
	}
	if c.heaps {
		saveHeap(prof, filepath.Join(out, "heap-end.pb.gz"))
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := writeCSV(filepath.Join(out, "soak.csv"), procs, samples); err != nil {
		return err
	}
	if err := plot(filepath.Join(out, "soak.png"), procs, samples); err != nil {
		return err
	}
	rep, verdict := judge(procs, samples, c)
	// The seed script's one buyer may hold a ticket too (its answers are
	// not counted by status).
	booksLine, booksErr := books(admin, data, loads[0].Codes["200"], loads[0].Unanswered()+1, 5*time.Minute)
	rep += booksLine
	checked, checkErr := checkBooks(data, redis, 1001, c.stock+int64(restocks)*max(c.stock/10, 1))
	rep += "books (e2e/chaos checker):\n" + checked
	verdict = errors.Join(verdict, booksErr, checkErr)
	fmt.Printf("\n%s (`go run ./bench/soak -duration %v`), load average %s, %d CPUs\n", time.Now().UTC().Format(time.RFC3339), c.dur, benchkit.LoadAvg(), runtime.NumCPU())
	fmt.Printf("soak.lua: %d requests, %.0f/s, p99 %v, %s\n", loads[0].Requests, loads[0].RPS, loads[0].P99, loads[0].CodesString())
	fmt.Printf("flash_sale.lua: %d requests, %.0f/s, p99 %v\n", loads[1].Requests, loads[1].RPS, loads[1].P99)
	fmt.Printf("restocks: %d\n%s", restocks, rep)
	fmt.Printf("CSV %s, plot %s\n", filepath.Join(out, "soak.csv"), filepath.Join(out, "soak.png"))
	if c.heaps {
		fmt.Printf("heap growth: go tool pprof -sample_index=inuse_space -diff_base %s %s %s\n",
			filepath.Join(out, "heap-early.pb.gz"), bin, filepath.Join(out, "heap-end.pb.gz"))
	}
	return verdict
}

// proc is one process watched; redis is its address for a redis-server,
// metrics its /metrics for seckill.
type proc struct {
	name, redis, metrics string
	pid                  int
}

// sample is one round of readings.
type sample struct {
	at    time.Duration
	rss   []int64 // bytes, per proc
	fds   []int
	thr   []int
	redis []redisMem // per proc (zero for seckill)
	heap  int64      // go_memstats_heap_inuse_bytes
	gor   int64      // go_goroutines
	sizes map[string]float64
	disk  int64
}

type redisMem struct{ used, records int64 }

var sizeGauge = regexp.MustCompile(`(?m)^(seckill_[a-z_]*(?:entries|holders|size|live_edges|queue|attempts)[a-z_]*)(\{[^}]*\})? ([0-9.e+]+)$`)

func take(at time.Duration, procs []proc, data string) sample {
	s := sample{at: at, sizes: map[string]float64{}}
	for _, p := range procs {
		rss, thr := procStatus(p.pid)
		s.rss, s.thr = append(s.rss, rss), append(s.thr, thr)
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
		s.fds = append(s.fds, len(fds))
		var rm redisMem
		if p.redis != "" {
			if info, err := benchkit.RedisInfo(p.redis, "memory"); err == nil {
				rm.used = infoInt(info, "used_memory")
			}
			if info, err := benchkit.RedisInfo(p.redis, "keyspace"); err == nil {
				rm.records = infoInt(info, "keys") // keys of db0: the crowd's cost is in one hash, records are read below
			}
		}
		s.redis = append(s.redis, rm)
		if p.metrics != "" {
			if b, err := get(p.metrics); err == nil {
				s.heap = int64(metric(b, "go_memstats_heap_inuse_bytes"))
				s.gor = int64(metric(b, "go_goroutines"))
				// What of the RSS is the Go heap: the heap's pages
				// not given back, the GC's next goal, everything
				// the runtime holds.
				s.sizes["go_heap_resident_bytes"] = metric(b, "go_memstats_heap_sys_bytes") - metric(b, "go_memstats_heap_released_bytes")
				s.sizes["go_memstats_next_gc_bytes"] = metric(b, "go_memstats_next_gc_bytes")
				s.sizes["go_memstats_sys_bytes"] = metric(b, "go_memstats_sys_bytes")
				for _, m := range sizeGauge.FindAllStringSubmatch(b, -1) {
					v, _ := strconv.ParseFloat(m[3], 64)
					s.sizes[m[1]+m[2]] = v
				}
				// One record per ticket held (one unit each here): ordered
				// plus occupied units.
				s.sizes["seckill_stock_records"] = metricLike(b, "seckill_sku_", "ordered_units") + metricLike(b, "seckill_sku_", "occupied_units")
			}
		}
	}
	_ = filepath.WalkDir(data, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if i, err := d.Info(); err == nil {
				s.disk += i.Size()
			}
		}
		return nil
	})
	return s
}

func (s sample) line(procs []proc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%6.0fs", s.at.Seconds())
	for i, p := range procs {
		fmt.Fprintf(&b, "  %s rss %s fds %d", p.name, mb(s.rss[i]), s.fds[i])
		if p.redis != "" {
			fmt.Fprintf(&b, " used %s", mb(s.redis[i].used))
		}
	}
	fmt.Fprintf(&b, "  heap %s (resident %s, next GC %s) goroutines %d disk %s", mb(s.heap),
		mb(int64(s.sizes["go_heap_resident_bytes"])), mb(int64(s.sizes["go_memstats_next_gc_bytes"])), s.gor, mb(s.disk))
	return b.String()
}

// saveHeap writes seckill's in-use heap profile, taken after a GC, to
// path; a failure is reported and the soak goes on.
func saveHeap(pprofAddr, path string) {
	b, err := get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
	if err == nil {
		err = os.WriteFile(path, []byte(b), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: heap profile:", err)
	}
}

func procStatus(pid int) (rss int64, threads int) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(fs[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "Threads":
			threads = int(n)
		}
	}
	return rss, threads
}

func get(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// metric reads an unlabelled sample.
func metric(body, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + name + ` ([0-9.e+]+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}

// metricLike sums the samples of the series named prefix…suffix.
func metricLike(body, prefix, suffix string) float64 {
	var sum float64
	for _, m := range regexp.MustCompile(`(?m)^(`+prefix+`[a-z_]*`+suffix+`)(\{[^}]*\})? ([0-9.e+]+)$`).FindAllStringSubmatch(body, -1) {
		v, _ := strconv.ParseFloat(m[3], 64)
		sum += v
	}
	return sum
}

func infoInt(info, field string) int64 {
	m := regexp.MustCompile(`(?m)` + field + `[:=](\d+)`).FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

var bannerRedis = regexp.MustCompile(`redis\s+(\S+) \(default\), (\S+) \(hot shard\)`)

// redisAddrs reads the two redis-servers' addresses from dev's banner.
func redisAddrs(log string) ([2]string, error) {
	for try := 0; try < 50; try++ {
		b, _ := os.ReadFile(log)
		if m := bannerRedis.FindSubmatch(b); m != nil {
			return [2]string{string(m[1]), string(m[2])}, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return [2]string{}, fmt.Errorf("no redis addresses in %s", log)
}

func writeCSV(path string, procs []proc, ss []sample) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	var names []string
	for n := range ss[len(ss)-1].sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	head := []string{"seconds"}
	for _, p := range procs {
		head = append(head, p.name+"_rss_bytes", p.name+"_fds", p.name+"_threads")
		if p.redis != "" {
			head = append(head, p.name+"_used_memory", p.name+"_keys")
		}
	}
	head = append(head, "go_heap_inuse_bytes", "go_goroutines", "disk_bytes")
	head = append(head, names...)
	_ = w.Write(head)
	for _, s := range ss {
		row := []string{strconv.FormatFloat(s.at.Seconds(), 'f', 0, 64)}
		for i, p := range procs {
			row = append(row, strconv.FormatInt(s.rss[i], 10), strconv.Itoa(s.fds[i]), strconv.Itoa(s.thr[i]))
			if p.redis != "" {
				row = append(row, strconv.FormatInt(s.redis[i].used, 10), strconv.FormatInt(s.redis[i].records, 10))
			}
		}
		row = append(row, strconv.FormatInt(s.heap, 10), strconv.FormatInt(s.gor, 10), strconv.FormatInt(s.disk, 10))
		for _, n := range names {
			row = append(row, strconv.FormatFloat(s.sizes[n], 'f', -1, 64))
		}
		_ = w.Write(row)
	}
	w.Flush()
	return w.Error()
}

// judge applies the two rules to every process's RSS (the growth rule to
// the Go process only: a redis-server grows by design with the records
// the sale sells) and reports what Redis holds per record.
func judge(procs []proc, ss []sample, c config) (string, error) {
	var b strings.Builder
	var bad []string
	for i, p := range procs {
		var after []int64
		var at2 int64 = -1
		for _, s := range ss {
			if s.at < c.warmup/2 {
				continue
			}
			after = append(after, s.rss[i])
			if at2 < 0 && s.at >= c.warmup {
				at2 = s.rss[i]
			}
		}
		if len(after) < 2 || at2 <= 0 {
			return b.String(), fmt.Errorf("too few samples after %v (%d)", c.warmup/2, len(after))
		}
		last := after[len(after)-1]
		sorted := append([]int64(nil), after...)
		sort.Slice(sorted, func(a, b int) bool { return sorted[a] < sorted[b] })
		median := sorted[len(sorted)/2]
		peak := sorted[len(sorted)-1]
		growth := float64(last-at2) / float64(at2)
		fmt.Fprintf(&b, "%s: RSS at %v %s, last %s (%+.1f%%), median %s, peak %s; fds %d→%d, threads %d→%d\n", p.name,
			c.warmup, mb(at2), mb(last), 100*growth, mb(median), mb(peak), ss[0].fds[i], ss[len(ss)-1].fds[i], ss[0].thr[i], ss[len(ss)-1].thr[i])
		if peak > 2*median {
			bad = append(bad, fmt.Sprintf("%s jumped to %s, over twice its median %s", p.name, mb(peak), mb(median)))
		}
		if p.redis == "" && growth > 0.10 {
			bad = append(bad, fmt.Sprintf("%s grew %.1f%% after %v", p.name, 100*growth, c.warmup))
		}
		if p.redis != "" {
			first, lastS := ss[0], ss[len(ss)-1]
			recs := lastS.sizes["seckill_stock_records"] - first.sizes["seckill_stock_records"]
			grew := lastS.redis[i].used - first.redis[i].used
			fmt.Fprintf(&b, "  %s used_memory %s→%s", p.name, mb(first.redis[i].used), mb(lastS.redis[i].used))
			if recs > 0 {
				fmt.Fprintf(&b, " (%.0f bytes per record held, %0.f records)", float64(grew)/recs, recs)
			}
			b.WriteString("\n")
		}
	}
	first, last := ss[0], ss[len(ss)-1]
	fmt.Fprintf(&b, "seckill heap in use %s→%s, goroutines %d→%d, data directory %s→%s\n",
		mb(first.heap), mb(last.heap), first.gor, last.gor, mb(first.disk), mb(last.disk))
	if len(bad) > 0 {
		return b.String(), fmt.Errorf("memory: %s", strings.Join(bad, "; "))
	}
	return b.String() + "verdict: flat\n", nil
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
