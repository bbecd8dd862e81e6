package app

import (
	"testing"
	"time"

	"seckill/cmd/seckill/config"
	"seckill/sale"
)

// TestUserSKUWindowIsCountedByTheOccupyScript: edge.rate.user_sku_limit and
// user_sku_window reach the engine — in process, and in a `seckill engine`
// sidecar built from the same configuration — whose occupy script counts
// them on the SKU's shard: past the limit, a buyer's attempt on a hot SKU
// within the window is 429 RATE_LIMITED with the window's time left as
// Retry-After (the attempt that took a ticket is not counted).
// The attempt counter and the buyer's record (the ticket's QUEUING) live
// on the hot shard, and the result is read by the requestNo and its owner.
func TestUserSKUWindowIsCountedByTheOccupyScript(t *testing.T) {
	for _, m := range []mode{{driver: "sqlite"}, {driver: "sqlite", sidecar: true}} {
		t.Run(m.String(), func(t *testing.T) {
			c := startClusterWith(t, m, func(cfg *config.Config) {
				cfg.Edge.Rate.UserSKULimit, cfg.Edge.Rate.UserSKUWindow = 2, time.Hour
			})
			c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1, Hot: true}))
			first := c.buy(t, 1001, 5)
			if first.Status != 200 || first.Code != "QUEUING" {
				t.Fatalf("first attempt: %+v", first)
			}
			if a, k, _, ok := sale.ParseRequestNo(first.RequestNo); !ok || a != 1 || k != 1001 {
				t.Fatalf("requestNo %q does not name activity 1, SKU 1001", first.RequestNo)
			}
			for try := 2; try <= 3; try++ {
				if a := c.buy(t, 1001, 5); a.Status != 409 || a.RequestNo != first.RequestNo {
					t.Fatalf("attempt %d: %+v, want the duplicate of %s", try, a, first.RequestNo)
				}
			}
			// The windows are fixed hours of the unix epoch: the wait is
			// what is left of this one (Retry-After in whole seconds).
			left := time.Until(time.Now().Truncate(time.Hour).Add(time.Hour)).Seconds()
			if a := c.buy(t, 1001, 5); a.Status != 429 || a.Code != "RATE_LIMITED" || float64(a.RetryAfter) < left-5 || float64(a.RetryAfter) > left+1 {
				t.Fatalf("fourth attempt: %+v, want 429 RATE_LIMITED with the rest of the hour (%.0f s) to wait", a, left)
			}
			if a := c.buy(t, 1001, 6); a.Status != 200 {
				t.Fatalf("another buyer: %+v", a)
			}
			if r := c.result(t, first.RequestNo, 5); r.Status != 200 || r.RequestNo != first.RequestNo {
				t.Fatalf("the result by requestNo alone: %+v", r)
			}
			// DESIGN §5: the window's hash and the result on the SKU's
			// shard; the hash counts buyer 5's three attempts that took no
			// ticket, and nothing for buyer 6, whose one attempt took one.
			window := sale.RateKey(1, 1001, time.Now().UnixMilli()/time.Hour.Milliseconds())
			if n, err := c.hot.Do(t, "HGET", window, "5").AsInt64(); err != nil || n != 3 {
				t.Fatalf("%s buyer 5 on the hot shard: %d %v, want 3 attempts", window, n, err)
			}
			if n := c.hot.Int(t, "HEXISTS", window, "6"); n != 0 {
				t.Fatalf("%s counts buyer 6's ticket", window)
			}
			// The ticket's QUEUING is buyer 5's record, on the hot shard.
			users := "sk:{a1:s1001}:users"
			if rn, err := c.hot.Do(t, "HGET", users, "5").ToString(); err != nil || rn != first.RequestNo {
				t.Fatalf("%s 5 on the hot shard: %q %v, want %s", users, rn, err, first.RequestNo)
			}
			if keys, err := c.redis.Do(t, "KEYS", "sk:{a1:s1001}*").AsStrSlice(); err != nil || len(keys) != 0 {
				t.Fatalf("the default Redis holds the hot SKU's keys %v", keys)
			}
		})
	}
}
