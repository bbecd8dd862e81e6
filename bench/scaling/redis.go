package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"seckill/bench/benchkit"
	"seckill/bench/refs/seed"
	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/sale"
	"seckill/stock"
)

// measureRedis is the stock shard's ceiling with group commit: workers
// callers (as many engines) loop occupy batches of o.batch distinct buyers
// on one SKU of one redis-server (with seckill dev's persistence); the
// ceiling is one core over the redis-server's CPU per buyer, since Redis
// runs scripts on one thread.
func measureRedis(o options) ([]figure, error) {
	p, addr, err := benchkit.StartRedis(o.out, "redis-shard", filepath.Join(o.out, "redis-shard"))
	if err != nil {
		return nil, err
	}
	defer p.StopWithin(10 * time.Second)
	cfg := shard.DefaultConfig()
	cfg.Default.Addrs = []string{addr}
	shards, err := shard.Open(cfg)
	if err != nil {
		return nil, err
	}
	defer shards.Close()
	cat := catalog.New(shards.Default)
	st := stock.New(shards, cat)
	ctx := context.Background()
	now := time.Now()
	act := sale.Activity{ID: 9, Start: now.Add(-time.Minute), End: now.Add(3 * time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 9001, Stock: 1 << 40, Price: 9900, LimitPerUser: 1}}}
	if err := st.Preheat(ctx, act); err != nil {
		return nil, err
	}
	a, k, ok := cat.Lookup(act.ID, act.SKUs[0].ID)
	if !ok {
		return nil, fmt.Errorf("the catalog does not hold activity %d after preheat", act.ID)
	}
	// What the engine passes with the dev defaults: the QUEUING result
	// written and the user × SKU window counted in the same call.
	extras := stock.Extras{WindowLimit: 10, WindowPeriod: 10 * time.Second}
	if !o.window {
		extras.WindowLimit = 0
	}
	ids := sale.NewRequestNos(1)
	logf("redis: %d callers, %d buyers a script call, %v", o.workers, o.batch, o.dur)
	n, cpu, wall, err := loopBuyers(p.PID(), o.workers, o.dur, func(g int) func() (int, error) {
		bs := make([]stock.Buyer, o.batch)
		out := make([]stock.OccupyResult, 0, o.batch)
		user := int64(g+1) * 1e12
		return func() (int, error) {
			for i := range bs {
				user++
				bs[i] = stock.Buyer{UserID: user, RequestNo: ids.Next(a.ID, k.ID), Quantity: 1}
			}
			var err error
			out, err = st.OccupyBatch(ctx, a, k, extras, bs, out[:0])
			if err == nil && out[len(out)-1].Code != stock.CodeOK {
				err = fmt.Errorf("occupy answered %v, want OK (the SKU's stock outlasts any run)", out[len(out)-1].Code)
			}
			return len(bs), err
		}
	})
	if err != nil {
		return nil, err
	}
	logf("redis: %d buyers in %v, redis-server CPU %v", n, wall.Round(time.Millisecond), cpu)
	return []figure{{part: "redis shard", what: fmt.Sprintf("buyers/s (group commit, %d a call)", o.batch),
		ceiling: perCore(n, cpu), seen: float64(n) / wall.Seconds(),
		note: fmt.Sprintf("redis-server CPU %.2f µs a buyer; %d callers", float64(cpu.Microseconds())/float64(max(n, 1)), o.workers),
		cmd:  fmt.Sprintf("go run ./bench/scaling -only redis -d %v -batch %d -workers %d (stock.OccupyBatch loops against one redis-server, its CPU from /proc)", o.dur, o.batch, o.workers)}}, nil
}

// seedCallers is how many goroutines loop the seed script at once: enough
// for rueidis to pipeline its calls, as the HTTP reference's 256
// connections do.
const seedCallers = 64

// measureSeedRedis is the yardstick of the redis shard's figure: seed 001
// §9.2's script (bench/refs/seed), one EVALSHA per buyer, a fresh user each,
// auto-pipelined against one redis-server with the same persistence; its
// buyers per core of Redis CPU, and the shard's figure as a ratio to it.
func measureSeedRedis(o options, shard []figure) ([]figure, error) {
	p, addr, err := benchkit.StartRedis(o.out, "redis-seed", filepath.Join(o.out, "redis-seed"))
	if err != nil {
		return nil, err
	}
	defer p.StopWithin(10 * time.Second)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	ctx := context.Background()
	for _, c := range seed.Preheat(1 << 40) {
		if err := rc.Do(ctx, rc.B().Arbitrary(c...).Build()).Error(); err != nil {
			return nil, err
		}
	}
	script := rueidis.NewLuaScript(seed.Script)
	keys := []string{seed.Stock, seed.Users, seed.Status}
	logf("redis (seed script): %d callers, one EVALSHA a buyer, %v", seedCallers, o.dur)
	var user atomic.Int64
	n, cpu, wall, err := loopBuyers(p.PID(), seedCallers, o.dur, func(int) func() (int, error) {
		var buf [20]byte
		return func() (int, error) {
			u := string(strconv.AppendInt(buf[:0], user.Add(1), 10))
			code, err := script.Exec(ctx, rc, keys, []string{u}).AsInt64()
			if err == nil && code != seed.Occupied {
				err = fmt.Errorf("seed script answered %d, want %d (occupied)", code, seed.Occupied)
			}
			return 1, err
		}
	})
	if err != nil {
		return nil, err
	}
	f := figure{part: "redis (seed script)", what: "buyers/s (one EVALSHA a buyer)", ceiling: perCore(n, cpu), seen: float64(n) / wall.Seconds(),
		note: fmt.Sprintf("redis-server CPU %.2f µs a buyer; %d callers", float64(cpu.Microseconds())/float64(max(n, 1)), seedCallers),
		cmd:  fmt.Sprintf("go run ./bench/scaling -only redis -d %v (seed 001 §9.2's script, bench/refs/seed, against one redis-server, its CPU from /proc)", o.dur)}
	for _, s := range shard {
		if f.ceiling > 0 {
			f.note += fmt.Sprintf("; the shard's figure is %.2f× of it", s.ceiling/f.ceiling)
		}
	}
	return []figure{f}, nil
}

// loopBuyers runs callers goroutines for dur, each calling the func its
// maker (given the goroutine's number) returns, which serves some buyers
// per call, and measures the redis-server pid's CPU over the run: the
// buyers served, its CPU, the wall time. The first error stops its caller
// and is returned.
func loopBuyers(pid, callers int, dur time.Duration, maker func(g int) func() (int, error)) (int64, time.Duration, time.Duration, error) {
	w, err := startCPU(pid)
	if err != nil {
		return 0, 0, 0, err
	}
	var buyers atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	for g := range callers {
		call := maker(g)
		wg.Go(func() {
			for time.Now().Before(deadline) {
				n, err := call()
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				buyers.Add(int64(n))
			}
		})
	}
	wg.Wait()
	cpu, wall, err := w.stop()
	if err == nil {
		err = firstErr
	}
	return buyers.Load(), cpu, wall, err
}
