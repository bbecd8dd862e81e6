package app

import (
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestThirtySalesLeaveRedisAsTheyFoundIt: thirty short sales of 100 buyers
// each for 10 units (half on the hot shard), over HTTP, with the periodic
// jobs running, a pay deadline and a retention of a second (the closer
// closes every order: few units, so that it keeps up on a loaded machine). Once every sale is past its end, its last
// pay deadline and the retention, the reconciler has compared each SKU with
// the database and expired its keys: on both Redis servers DBSIZE and
// used_memory (less the buffers of its connections, which follow how many
// the processes opened) are back within 10% of what they were after a
// first sale on each had come and gone (scripts loaded), and every ticket's
// result is still answered by the edge — from the database — as the order
// table says it ended.
func TestThirtySalesLeaveRedisAsTheyFoundIt(t *testing.T) {
	testenv.Long(t)
	c := startClusterWith(t, mode{driver: "sqlite"}, func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Order.PayTimeout = time.Second
		cfg.Order.RedisRetention = time.Second
		cfg.Reconcile.Interval = time.Second
		cfg.Reconcile.SweepInterval = time.Second
		cfg.Reconcile.OrphanGrace = cfg.Engine.OccupyTimeout + cfg.Engine.Kafka.SendTimeout + time.Second
	})
	db := c.db(t)
	type ticket struct {
		user int64
		rn   string
	}
	var preheat sync.Mutex
	sell := func(id int64, buyers, stock int) []ticket {
		t.Helper()
		now := time.Now()
		sku := 100*id + 1
		preheat.Lock() // one activity written at a time, as an operator does
		c.preheat(t, sale.Activity{ID: id, Start: now.Add(-time.Second), End: now.Add(20 * time.Second), State: sale.StateOnline,
			SKUs: []sale.SKU{{ID: sku, Stock: int64(stock), Price: 100, LimitPerUser: 1, Hot: id%2 == 0}}})
		preheat.Unlock()
		var (
			mu  sync.Mutex
			out []ticket
			wg  sync.WaitGroup
		)
		users := make(chan int64)
		for w := 0; w < 16; w++ {
			wg.Go(func() {
				for u := range users {
					a := c.buy(t, sku, u)
					for try := 0; (a.Status == 429 || a.Status == 503) && try < 10; try++ {
						time.Sleep(time.Duration(max(a.RetryAfter, 1)) * time.Second)
						a = c.buy(t, sku, u)
					}
					if a.Status == 200 && a.RequestNo != "" {
						mu.Lock()
						out = append(out, ticket{u, a.RequestNo})
						mu.Unlock()
					}
				}
			})
		}
		for u := int64(1); u <= int64(buyers); u++ {
			users <- id*1000 + u
		}
		close(users)
		wg.Wait()
		if len(out) == 0 {
			t.Fatalf("sale %d: no buyer accepted", id)
		}
		return out
	}
	// gone waits until activity id has no key left on either Redis.
	gone := func(id int64) {
		t.Helper()
		pattern := "sk:{a" + strconv.FormatInt(id, 10) + ":*"
		testenv.EventuallyOK(t, fmt.Sprintf("sale %d's keys to expire", id), 90*time.Second, func() error {
			for _, r := range []*testenv.Redis{c.redis, c.hot} {
				keys, err := r.Do(t, "KEYS", pattern).AsStrSlice()
				if err != nil {
					return err
				}
				if len(keys) > 0 {
					return fmt.Errorf("%d keys left, e.g. %s", len(keys), keys[0])
				}
			}
			if n, err := c.redis.Do(t, "EXISTS", sale.ActivityKey(id)).AsInt64(); err != nil || n != 0 {
				return fmt.Errorf("catalog entry: %d %v", n, err)
			}
			return nil
		})
	}
	// usage is a Redis's keys and memory; clients is the part of mem in
	// the buffers of its connections, which follows how many the
	// processes opened (more under a bigger crowd), not what the sales
	// stored.
	type usage struct{ keys, mem, clients int64 }
	measure := func() [2]usage {
		t.Helper()
		var out [2]usage
		for i, r := range []*testenv.Redis{c.redis, c.hot} {
			n, err := r.Do(t, "DBSIZE").AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			info, err := r.Do(t, "INFO", "memory").ToString()
			if err != nil {
				t.Fatal(err)
			}
			out[i] = usage{keys: n, mem: infoInt(t, info, "used_memory"), clients: infoInt(t, info, "mem_clients_normal")}

		}
		return out
	}

	// A first sale on each Redis loads the scripts and opens the
	// connections.
	sell(100, 20, 5) // hot
	sell(101, 20, 5)
	gone(100)
	gone(101)
	base := measure()

	var (
		tickets []ticket
		tmu     sync.Mutex
		swg     sync.WaitGroup
	)
	t0 := time.Now()
	ids := make(chan int64)
	for w := 0; w < 5; w++ {
		swg.Go(func() {
			for id := range ids {
				got := sell(id, 100, 10)
				tmu.Lock()
				tickets = append(tickets, got...)
				tmu.Unlock()
			}
		})
	}
	for id := int64(1); id <= 30; id++ {
		ids <- id
	}
	close(ids)
	swg.Wait()
	t.Logf("30 sales took %v", time.Since(t0))
	// The sales' keys exist while they run.
	if during := measure(); during[0].keys <= base[0].keys || during[1].keys <= base[1].keys {
		t.Fatalf("no keys during the sales: %+v, baseline %+v", during, base)
	}
	for id := int64(1); id <= 30; id++ {
		gone(id)
	}
	t.Logf("their keys were gone %v after the first began", time.Since(t0))
	// Redis gives freed memory back in its own housekeeping (the
	// allocator's dirty pages, hash tables shrunk by its cron): the
	// memory must come back within 10% of the baseline within seconds of
	// the keys going, MEMORY PURGE asking it along.
	var after [2]usage
	within := func() error {
		for _, r := range []*testenv.Redis{c.redis, c.hot} {
			r.Do(t, "MEMORY", "PURGE")
		}
		after = measure()
		for i, name := range []string{"default", "hot"} {
			b, a := base[i].mem-base[i].clients, after[i].mem-after[i].clients
			if after[i].keys*10 > base[i].keys*11 || a*10 > b*11 {
				return fmt.Errorf("%s Redis after 30 sales: %+v, baseline %+v (10%% allowed)", name, after[i], base[i])
			}
		}
		return nil
	}
	testenv.EventuallyOK(t, "Redis memory back at its baseline", 15*time.Second, within)
	for i, name := range []string{"default", "hot"} {
		t.Logf("%s Redis: baseline %d keys, used_memory %d (%d without client buffers); after 30 sales %d keys, %d (%d)",
			name, base[i].keys, base[i].mem, base[i].mem-base[i].clients, after[i].keys, after[i].mem, after[i].mem-after[i].clients)
	}

	// Every ticket's result, from the database now, as it ended: its
	// order, closed unpaid or not, or none (released).
	for _, tk := range tickets {
		var orderNo, status string
		err := db.QueryRow(`SELECT order_no, status FROM seckill_order WHERE request_no = ?`, tk.rn).Scan(&orderNo, &status)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("order of %s: %v", tk.rn, err)
		}
		want := "SUCCESS"
		if err != nil || status == "CLOSED" {
			want = "FAIL"
		}
		r := c.result(t, tk.rn, tk.user)
		if r.Status != 200 || r.Code != want || r.RequestNo != tk.rn || want == "SUCCESS" && r.OrderNo != orderNo {
			t.Fatalf("result of %s (order %s %s): %+v, want %s", tk.rn, orderNo, status, r, want)
		}
	}
	t.Logf("%d tickets of 30 sales read back from the database", len(tickets))
}

// infoInt reads field of an INFO answer.
func infoInt(t *testing.T, info, field string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + field + `:(\d+)`).FindStringSubmatch(info)
	if m == nil {
		t.Fatalf("no %s in %q", field, info)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
