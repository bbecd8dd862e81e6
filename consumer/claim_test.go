package consumer

import (
	"context"
	"strings"
	"testing"

	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/stocktest"
	"seckill/store"
)

// TestBatchClaimsRouteHotSKUsToTheirShard: one batch mixes a hot SKU (its
// own Redis) and a default-shard SKU; every ticket is claimed on the shard
// that holds its occupancy, a ticket released before the batch gets no
// order, and nothing of the hot SKU lands on the default shard.
func TestBatchClaimsRouteHotSKUsToTheirShard(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		hot := testenv.StartRedis(t)
		r.stock, r.res = stocktest.Stock(t, r.redis, func(c *shard.Config) { c.Hot = shard.HotShards{{Addrs: []string{hot.Addr}}} })
		// SKU skuID becomes hot. newRig preheated it on the default
		// shard, with no holders there: a claim sent there is NOT_HELD.
		r.act.SKUs[0].Hot = true
		if err := r.stock.Preheat(ctx, r.act); err != nil {
			t.Fatal(err)
		}
		var hotMsgs, plain []sale.Message
		for u := int64(1); u <= 20; u++ {
			hotMsgs = append(hotMsgs, r.occupy(t, skuID, u))
		}
		for u := int64(1); u <= 3; u++ {
			plain = append(plain, r.occupy(t, emptyID, u))
		}
		released := hotMsgs[2]
		if out, err := r.stock.Release(ctx, &released, false); err != nil || out != stock.Released {
			t.Fatalf("release: %v, %v", out, err)
		}
		r.produce(t, append(hotMsgs, plain...)...)
		r.start(t)
		for _, m := range hotMsgs {
			e := r.result(t, m.RequestNo)
			if m.RequestNo == released.RequestNo {
				if e.State != sale.ResultFail || e.Code != sale.FailReleased {
					t.Errorf("released ticket: %+v, want FAIL RELEASED", e)
				}
				continue
			}
			if e.State != sale.ResultSuccess || e.OrderNo != testenv.OrderNo(m.RequestNo) {
				t.Errorf("hot ticket of user %d: %+v, want SUCCESS", m.UserID, e)
			}
		}
		for _, m := range plain {
			if e := r.result(t, m.RequestNo); e.State != sale.ResultFail || e.Code != sale.FailSoldOut {
				t.Errorf("ticket of the SKU the database has none of: %+v, want FAIL SOLD_OUT", e)
			}
		}
		if n := r.orders(t, skuID); n != 19 {
			t.Errorf("%d orders of the hot SKU, want 19", n)
		}
		keys := sale.KeysFor(actID, skuID)
		if n, err := hot.Do(t, "SCARD", keys.Claim).AsInt64(); err != nil || n != 19 {
			t.Errorf("claimed on the hot shard: %d, %v; want 19", n, err)
		}
		if n, err := r.redis.Do(t, "SCARD", keys.Claim).AsInt64(); err != nil || n != 0 {
			t.Errorf("claimed on the default shard: %d, %v; want 0", n, err)
		}
		// The sold-out tickets were claimed on the default shard, then
		// released by force: their stock is back.
		if k := r.counts(t, emptyID); k.Remaining != 5 || k.Holders != 0 {
			t.Errorf("default-shard SKU after the forced releases: %+v", k)
		}
		for _, m := range hotMsgs[:2] {
			// message_id names the Kafka message the order came from.
			if e, err := r.st.RequestLog(ctx, m.RequestNo); err != nil || e.Status != store.StatusSuccess ||
				!strings.Contains(e.MessageID, "/") {
				t.Errorf("request log of an order: %+v, %v", e, err)
			}
		}
	})
}
