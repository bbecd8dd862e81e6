package app

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"seckill/admin"
	"seckill/cmd/seckill/config"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
)

// TestSaleOnTwoHotShards: the whole system with two hot shards. Hot SKUs
// placed by hotShard and by the rule sell exactly their stock through the
// edge, engine and consumer (claims on each SKU's own shard); the admin
// stock view names each SKU's shard; /readyz fails once one hot shard is
// down.
func TestSaleOnTwoHotShards(t *testing.T) {
	hot1 := testenv.StartRedis(t)
	c := startClusterWith(t, mode{driver: "sqlite"}, func(cfg *config.Config) {
		crowdBudgets(cfg)
		cfg.Redis.Hot = append(cfg.Redis.Hot, shard.Redis{Addrs: []string{hot1.Addr}})
	})
	zero, one := 0, 1
	skus := []sale.SKU{
		{ID: 501, Stock: 15, Price: 100, LimitPerUser: 1, Hot: true, HotShard: &one},
		{ID: 502, Stock: 15, Price: 100, LimitPerUser: 1, Hot: true, HotShard: &zero},
		{ID: 503, Stock: 15, Price: 100, LimitPerUser: 1, Hot: true}, // the rule
		{ID: 504, Stock: 15, Price: 100, LimitPerUser: 1},
	}
	c.preheat(t, openActivity(5, skus...))
	wantShard := map[int64]string{501: "hot1", 502: "hot0", 503: shard.HotName(shard.HotIndex(5, 503, 2)), 504: "default"}

	// 25 buyers per SKU for 15 units each.
	type got struct {
		sku, user int64
		a         answer
	}
	out := make(chan got, 100)
	var wg sync.WaitGroup
	for _, k := range skus {
		for u := int64(1); u <= 25; u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := c.buy(t, k.ID, u)
				for try := 0; a.Status == 429 && try < 30; try++ {
					time.Sleep(time.Duration(max(a.RetryAfter, 1)) * time.Second)
					a = c.buy(t, k.ID, u)
				}
				out <- got{k.ID, u, a}
			}()
		}
	}
	wg.Wait()
	close(out)
	tickets := map[int64]map[string]int64{}
	for g := range out {
		switch g.a.Status {
		case 200:
			if tickets[g.sku] == nil {
				tickets[g.sku] = map[string]int64{}
			}
			tickets[g.sku][g.a.RequestNo] = g.user
		case 410:
		default:
			t.Errorf("sku %d user %d: %+v", g.sku, g.user, g.a)
		}
	}
	for _, k := range skus {
		if n := len(tickets[k.ID]); n != 15 {
			t.Errorf("sku %d: %d tickets, want exactly its 15 units", k.ID, n)
		}
	}
	testenv.EventuallyOK(t, "every ticket's SUCCESS", 30*time.Second, func() error {
		for sku, ts := range tickets {
			for rn, u := range ts {
				if r := c.result(t, rn, u); r.Code != sale.ResultSuccess {
					return fmt.Errorf("sku %d ticket %s: %+v", sku, rn, r)
				}
			}
		}
		return nil
	})
	db := c.db(t)
	for _, k := range skus {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM seckill_order WHERE activity_id=5 AND sku_id=?", k.ID).Scan(&n); err != nil || n != 15 {
			t.Errorf("sku %d: %d orders (%v), want 15", k.ID, n, err)
		}
	}

	r := send(t, "GET", c.admin+"/admin/v1/activities/5/stock", 0, "Bearer "+c.cfg.Admin.Token, "")
	var rep admin.StockReport
	if err := json.Unmarshal([]byte(r.raw), &rep); err != nil {
		t.Fatalf("stock view %d %s: %v", r.status, r.raw, err)
	}
	for _, l := range rep.SKUs {
		if l.Shard != wantShard[l.SKUID] || l.Remaining != 0 || l.Ordered != 15 || l.Drift != 0 {
			t.Errorf("sku %d: %+v, want on %s, 15 ordered, none left, no drift", l.SKUID, l, wantShard[l.SKUID])
		}
	}

	if r := send(t, "GET", c.admin+"/readyz", 0, "", ""); r.status != 200 {
		t.Fatalf("/readyz with every shard up: %d %s", r.status, r.raw)
	}
	hot1.Stop()
	testenv.Eventually(t, "/readyz failing with hot1 down", 10*time.Second, func() bool {
		return send(t, "GET", c.admin+"/readyz", 0, "", "").status == 503
	})
}
