package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"
	_ "modernc.org/sqlite"

	"seckill/cmd/seckill/devserver"
	"seckill/internal/testenv"
	"seckill/sale"
)

// A restart at real data sizes. `seckill dev` — the edge, engine
// and consumer in one process, its two redis-servers, the embedded broker
// and the SQLite file, everything in one data directory — sells a large
// sale, is SIGKILLed with its whole process group mid-sale, and is started
// again on the same directory. Unlike the rest of the suite this runs the
// all-in-one shape, not separate processes: it is what a developer or a
// single-box demo restarts, and the one whose data directory holds every
// server's files.

// raceFreeAbove is the sale size from which the scenario runs a build
// without -race: at 250,000 tickets a race build's dev process and the
// checker's reads of that many rows outgrow its time limits on two cores.
const raceFreeAbove = 50_000

var (
	plainOnce sync.Once
	plainBin  string
	plainErr  error
)

// devBinary is the seckill binary for a sale of n tickets: the suite's
// -race build, or above raceFreeAbove one built without it.
func devBinary(t *testing.T, n int) string {
	t.Helper()
	if n <= raceFreeAbove {
		return seckillBinary(t)
	}
	plainOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seckill-chaos-plain-")
		if err != nil {
			plainErr = err
			return
		}
		plainBin = filepath.Join(dir, "seckill")
		plainErr = testenv.BuildSeckill(plainBin, false)
	})
	if plainErr != nil {
		t.Fatal(plainErr)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(plainBin)) })
	return plainBin
}

// largeSaleEnv overrides the number of tickets sold before the kill.
const largeSaleEnv = "SECKILL_RESTART_TICKETS"

// largeSale is how many tickets are accepted before the kill: 20,000 in
// make test, or $SECKILL_RESTART_TICKETS (make chaos: 250,000, about two
// minutes of buying here, on a build without -race: see devBinary).
func largeSale(t *testing.T) int {
	t.Helper()
	if v := os.Getenv(largeSaleEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("%s=%q: want a number of tickets >= 1000", largeSaleEnv, v)
		}
		return n
	}
	return 20_000
}

// devProcess is one `seckill dev` on a data directory (testenv.Dev: a
// process group of its own, so that a SIGKILL of the group takes its
// redis-server children down with it, as a crash of the box would).
type devProcess struct {
	*testenv.Dev
	dir     string // its data directory
	cfgPath string
}

// waitReady waits until seckill dev is ready and points the System's
// Redis at the redis-servers of this run.
func (d *devProcess) waitReady(s *System, timeout time.Duration) (time.Duration, error) {
	took, err := d.AwaitReady(timeout)
	if err != nil {
		return took, err
	}
	r := d.Redis()
	s.Redis, s.Hot = &testenv.Redis{Addr: r[0]}, &testenv.Redis{Addr: r[1]}
	return took, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// startDev writes seckill dev's configuration (the project's defaults,
// this test's listeners, limits that let a crowd from 127.0.0.1 through,
// SQLite in the data directory), starts it and returns the System the
// suite's checker counts with: its Redis, its SQLite file, its edge and
// admin API.
func startDev(t *testing.T, bin string) (*System, *devProcess) {
	t.Helper()
	root := t.TempDir()
	s := &System{t: t, dir: root, bin: bin,
		edgeAddr:  fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		adminAddr: fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)),
		client: &http.Client{
			Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
			Timeout:   10 * time.Second,
		},
	}
	t.Cleanup(s.client.CloseIdleConnections)
	d := &devProcess{dir: filepath.Join(root, "data"), cfgPath: filepath.Join(root, "seckill.yaml")}

	// seckill dev reads this over its dev defaults (configs/dev.yaml). As
	// writeConfig: the crowd comes from 127.0.0.1, so the per-address
	// limits let it through; a short orphan grace keeps the wait for the
	// sweeper short (occupancies whose buyers lost their answer in the
	// kill); bigger consumer batches, as the crowd is large.
	b := []byte(fmt.Sprintf(`log:
  format: console
  level: info
edge:
  listen: %q
  read_timeout: 2s
  write_timeout: 2s
  max_conns_per_ip: 0
  rate:
    ip_exempt: [127.0.0.1/32]
    ip_per_second: 0
admin:
  listen: %q
  token: %q
token:
  keys: [{id: %q, secret: %q}]
store:
  driver: sqlite
  dsn: seckill.db # dev puts it in its data directory
consumer:
  batch_size: 2000
  max_wait: 50ms
dev:
  data_dir: %q
  demo: false
reconcile:
  orphan_grace: 5s
  sweep_interval: 1s
  watch_interval: 1s
`, s.edgeAddr, s.adminAddr, adminToken, tokenKeyID, tokenSecret, d.dir))
	s.sweeper = true
	d.Dev = testenv.NewDev(s.bin, filepath.Join(root, "dev.log"), s.edgeAddr, []string{"--config", d.cfgPath}, testenv.CleanEnv())
	if err := os.WriteFile(d.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(syscall.SIGTERM, 30*time.Second) })
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SECKILL_CHAOS_KEEP_LOGS") != "" {
			keep := filepath.Join(os.TempDir(), "seckill-chaos-logs", strings.ReplaceAll(t.Name(), "/", "_"))
			_ = os.MkdirAll(keep, 0o755)
			if b, err := os.ReadFile(d.Log); err == nil {
				_ = os.WriteFile(filepath.Join(keep, "dev.log"), b, 0o644)
			}
			t.Logf("----- last lines of seckill dev:\n%s\nfull log kept in %s", lastLines(d.SinceStart(), 30), keep)
		}
	})

	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.waitReady(s, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	// The checker reads the orders from the same SQLite file (WAL: its
	// reads never block the dev process's writes).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(d.dir, "seckill.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	t.Cleanup(func() { db.Close() })
	s.db = db
	return s, d
}

// soldUnits is what Redis has sold of the sale's SKUs (the occupy
// scripts' sold counters).
func soldUnits(s *System) (int64, error) {
	var total int64
	for _, r := range []struct {
		addr string
		sku  int64
	}{{s.Redis.Addr, skuNormal}, {s.Hot.Addr, skuHot}} {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr}, DisableCache: true})
		if err != nil {
			return 0, err
		}
		n, err := c.Do(context.Background(), c.B().Get().Key(sale.KeysFor(activityID, r.sku).Sold).Build()).AsInt64()
		c.Close()
		if err != nil && !rueidis.IsRedisNil(err) {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// dirBytes is the size of the files under dir whose path matches glob
// (relative to dir; "" for every file).
func dirBytes(dir, glob string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		if glob != "" {
			rel, _ := filepath.Rel(dir, path)
			if ok, _ := filepath.Match(glob, rel); !ok {
				return nil
			}
		}
		n += info.Size()
		return nil
	})
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// TestDevKilledAfterALargeSale: `seckill dev` sells a large sale (250,000
// tickets under make chaos; 20,000 in make test; SECKILL_RESTART_TICKETS
// sets it) to a paced crowd of distinct buyers, three quarters of them on
// the hot SKU. Once Redis has sold that many units, with the crowd still
// buying, the whole process group — seckill dev and both redis-servers —
// is SIGKILLed, as a crash of the box would. seckill dev is started again
// on the same data directory: it comes back (its /readyz within the start
// timeout), every ticket accepted before the kill ends as an order or a
// FAIL whose occupancy was released, a second crowd buys (the sale goes
// on), every invariant holds, and once the consumer has caught up the
// broker's log has shed what it consumed.
func TestDevKilledAfterALargeSale(t *testing.T) {
	began := time.Now()
	n := largeSale(t)
	var run *Run
	rep := &report{Stock: map[int64]int64{}}
	rep.add("scenario ran to its check", false, "stopped before the invariant check")
	defer func() {
		if run == nil {
			run = &Run{Tickets: map[string]ticket{}}
		}
		record(t, run, rep, time.Since(began))
	}()

	s, d := startDev(t, devBinary(t, n))
	// Stock for every buyer of both crowds: the sale is not over when the
	// kill comes, nor after the restart.
	crowd1 := n + n/5
	const crowd2 = 3000
	skus := map[int64]int64{skuNormal: int64(crowd1+crowd2) / 3, skuHot: int64(crowd1 + crowd2)}
	s.preheat(saleActivity(skus[skuNormal], skus[skuHot]))

	rate, workers := 2500, 96
	if n >= 100_000 {
		rate, workers = 4000, 128
	}
	ctx, stopCrowd := context.WithCancel(context.Background())
	defer stopCrowd()
	var (
		killedAt   time.Time
		soldAtKill int64
		killErr    error
	)
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		deadline := time.Now().Add(time.Duration(crowd1/rate)*time.Second*3 + time.Minute)
		for {
			sold, err := soldUnits(s)
			if err == nil && sold >= int64(n) {
				soldAtKill = sold
				break
			}
			if time.Now().After(deadline) {
				killErr = fmt.Errorf("only %d units sold (%v) by %v", sold, err, deadline.Format(time.TimeOnly))
				break
			}
			select {
			case <-ctx.Done():
				killErr = fmt.Errorf("the crowd ended with %d units sold (%v), fewer than %d", sold, err, n)
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		killedAt = time.Now()
		d.KillGroup()
		stopCrowd()
	}()
	start := time.Now()
	run = s.buy(ctx, LoadSpec{Users: crowd1, Repeats: n / 50, HotFrac: 0.75, Rate: rate, Workers: workers, Seed: 17})
	stopCrowd()
	<-watch
	if killErr != nil {
		t.Fatalf("kill: %v; the crowd: %s", killErr, run.summary())
	}
	var before, lost int
	for _, a := range run.Attempts {
		switch {
		case a.Status == 200 && a.Sent.Add(a.Took).Before(killedAt):
			before++
		case a.Status == 0:
			lost++
		}
	}
	t.Logf("the crowd bought for %v: %d sent, %d accepted (%d answered before the kill), %d lost their answer in the kill; Redis had sold %d units at the kill: %s",
		killedAt.Sub(start).Round(time.Millisecond), run.sent(), run.accepted(), before, lost, soldAtKill, run.summary())
	s.expect(fmt.Sprintf("the kill struck a sale of >= %d tickets in progress", n),
		before >= n*9/10 && soldAtKill >= int64(n) && soldAtKill < skus[skuNormal]+skus[skuHot],
		"%d tickets answered before the kill, %d units sold by then, %d on sale", before, soldAtKill, skus[skuNormal]+skus[skuHot])

	sizes := fmt.Sprintf("data directory %s after the kill: redis %s, redis-hot %s, broker %s, SQLite %s",
		mib(dirBytes(d.dir, "")), mib(dirBytes(filepath.Join(d.dir, "redis"), "")), mib(dirBytes(filepath.Join(d.dir, "redis-hot"), "")),
		mib(dirBytes(filepath.Join(d.dir, "kafka"), "")), mib(dirBytes(d.dir, "seckill.db*")))
	t.Log(sizes)

	// The restart, on the same directory.
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	took, err := d.waitReady(s, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	waits := regexp.MustCompile(`dependency ready\s+\{"dependency": "([^"]+)", "waited": "([^"]+)"`).FindAllStringSubmatch(d.SinceStart(), -1)
	var waited []string
	for _, w := range waits {
		waited = append(waited, w[1]+" "+w[2])
	}
	t.Logf("seckill dev ready %v after the restart (waited for: %s)", took.Round(time.Millisecond), strings.Join(waited, ", "))
	s.expect("seckill dev comes back on the killed sale's data directory", took < 2*time.Minute,
		"ready after %v; waited for %v", took.Round(time.Millisecond), waited)

	// The sale goes on: new buyers.
	after := s.buy(context.Background(), LoadSpec{Users: crowd2, HotFrac: 0.75, Rate: 1000, Workers: 32, Seed: 18, FirstUser: int64(crowd1) + 1})
	t.Logf("after the restart: %d sent, %d accepted: %s", after.sent(), after.accepted(), after.summary())
	s.expect("after the restart the sale goes on", after.accepted() >= crowd2*9/10,
		"%d of %d new buyers accepted: %s", after.accepted(), crowd2, after.summary())
	mergeRuns(run, after)

	// Once everything is consumed, within a trim period the broker's log
	// is gone but for at most part of a segment (the last records of a
	// partition whose commit the trim has not seen yet). Without trimming
	// it would hold every order: ~4.5 MiB at 20,000 tickets, ~45 MiB at
	// 250,000.
	s.quiesce(run, skus, 3*time.Minute)
	const bound = devserver.DefaultSegmentBytes
	var logBytes int64
	deadline := time.Now().Add(3 * devserver.DefaultTrimInterval)
	for {
		logBytes = dirBytes(filepath.Join(d.dir, "kafka", "partitions"), sale.OrdersTopic+"-*/*.dat")
		if logBytes <= bound || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.expect("the broker's log keeps only what the consumer has not committed", logBytes <= bound,
		"%s of %s segments once the consumer caught up (bound: %s); %s", mib(logBytes), sale.OrdersTopic, mib(bound), sizes)

	t.Logf("crowd: %d sent, %d accepted: %s", run.sent(), run.accepted(), run.summary())
	rep = s.checkInvariants(run, skus)
}
