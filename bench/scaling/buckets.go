package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"seckill/bench/benchkit"
	"seckill/catalog"
	"seckill/internal/shard"
	"seckill/sale"
	"seckill/stock"
)

// callCounter counts the commands sent to one shard (each occupy script
// call is one).
type callCounter struct {
	rueidis.Client
	n *atomic.Int64
}

func (c callCounter) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

// measureBuckets is one SKU split into 1, 2 and 4 buckets over two hot
// shards (two redis-servers, buckets pinned alternately): buyers per core
// of the two servers' CPU together, each shard's CPU per buyer and the
// share of script calls each shard ran. The same callers, batch and
// window as the redis part.
func measureBuckets(o options) ([]figure, error) {
	var figs []figure
	var ps [2]*benchkit.Proc
	cfg := shard.DefaultConfig()
	for i := range ps {
		name := "redis-bucket" + strconv.Itoa(i)
		p, addr, err := benchkit.StartRedis(o.out, name, filepath.Join(o.out, name))
		if err != nil {
			return nil, err
		}
		defer p.StopWithin(10 * time.Second)
		ps[i] = p
		if i == 0 {
			cfg.Default.Addrs = []string{addr}
		}
		cfg.Hot = append(cfg.Hot, shard.Redis{Addrs: []string{addr}})
	}
	// hot0 is the default deployment too (the catalog, the events).
	shards, err := shard.Open(cfg)
	if err != nil {
		return nil, err
	}
	defer shards.Close()
	var calls [2]atomic.Int64
	shards.Wrap(func(idx int, c rueidis.Client) rueidis.Client {
		if idx < 0 {
			return callCounter{c, &calls[0]}
		}
		return callCounter{c, &calls[idx]}
	})
	cat := catalog.New(shards.Default)
	st := stock.New(shards, cat)
	ctx := context.Background()
	extras := stock.Extras{WindowLimit: 10, WindowPeriod: 10 * time.Second}
	if !o.window {
		extras.WindowLimit = 0
	}
	for _, n := range []int{1, 2, 4} {
		now := time.Now()
		k := sale.SKU{ID: int64(9100 + n), Stock: 1 << 40, Price: 9900, LimitPerUser: 1, Hot: true}
		if n > 1 {
			k.Buckets, k.HotShards = n, []int{0, 1}
		} else {
			pin := 1
			k.HotShard = &pin
		}
		act := sale.Activity{ID: int64(90 + n), Start: now.Add(-time.Minute), End: now.Add(3 * time.Hour), State: sale.StateOnline, SKUs: []sale.SKU{k}}
		if err := st.Preheat(ctx, act); err != nil {
			return nil, err
		}
		a, pk, ok := cat.Lookup(act.ID, k.ID)
		if !ok {
			return nil, fmt.Errorf("the catalog does not hold activity %d after preheat", act.ID)
		}
		ids := sale.NewRequestNos(1)
		var w [2]cpuWindow
		for i := range w {
			if w[i], err = startCPU(ps[i].PID()); err != nil {
				return nil, err
			}
		}
		c0, c1 := calls[0].Load(), calls[1].Load()
		logf("buckets: %d bucket(s), %d callers, %d buyers a batch, %v", n, o.workers, o.batch, o.dur)
		nb, _, wall, err := loopBuyers(ps[0].PID(), o.workers, o.dur, func(g int) func() (int, error) {
			bs := make([]stock.Buyer, o.batch)
			out := make([]stock.OccupyResult, 0, o.batch)
			user := int64(g+1)*1e12 + int64(n)*1e14
			return func() (int, error) {
				for i := range bs {
					user++
					bs[i] = stock.Buyer{UserID: user, RequestNo: ids.NextIn(a.ID, pk.ID, pk.BucketOf(user)), Quantity: 1}
				}
				var err error
				out, err = st.OccupyBatch(ctx, a, pk, extras, bs, out[:0])
				if err == nil && out[len(out)-1].Code != stock.CodeOK {
					err = fmt.Errorf("occupy answered %v, want OK", out[len(out)-1].Code)
				}
				return len(bs), err
			}
		})
		if err != nil {
			return nil, err
		}
		var cpu [2]time.Duration
		for i := range w {
			if cpu[i], _, err = w[i].stop(); err != nil {
				return nil, err
			}
		}
		d0, d1 := calls[0].Load()-c0, calls[1].Load()-c1
		per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(max(nb, 1)) }
		var split strings.Builder
		fmt.Fprintf(&split, "script calls hot0 %.1f%% / hot1 %.1f%%", 100*float64(d0)/float64(max(d0+d1, 1)), 100*float64(d1)/float64(max(d0+d1, 1)))
		logf("buckets: %d bucket(s): %d buyers in %v; CPU hot0 %v hot1 %v; %s", n, nb, wall.Round(time.Millisecond), cpu[0], cpu[1], split.String())
		figs = append(figs, figure{part: "one sku, " + strconv.Itoa(n) + " bucket(s)", what: "buyers/s per core of the shards' CPU",
			ceiling: perCore(nb, cpu[0]+cpu[1]), seen: float64(nb) / wall.Seconds(),
			note: fmt.Sprintf("CPU a buyer: hot0 %.2f µs, hot1 %.2f µs; %s", per(cpu[0]), per(cpu[1]), split.String()),
			cmd:  fmt.Sprintf("go run ./bench/scaling -only buckets -d %v -batch %d -workers %d", o.dur, o.batch, o.workers)})
	}
	return figs, nil
}
