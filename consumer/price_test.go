package consumer

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"seckill/sale"
	"seckill/store"
)

// TestRedisCatalogPriceCannotChangeAnOrdersPrice: a peer that reaches
// Redis rewrites the SKU's catalog copy (the activity's JSON and the SKU's
// meta hash) to sell at 0.01 and lets a buyer take 5 units; the ticket's
// message says 0.01 too. The order is made at the database's 9.90, and a
// message over the database's per-user limit is dead-lettered.
func TestRedisCatalogPriceCannotChangeAnOrdersPrice(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		m := r.occupy(t, skuID, 31)
		forged := r.act
		forged.SKUs = append([]sale.SKU(nil), r.act.SKUs...)
		forged.SKUs[0].Price, forged.SKUs[0].LimitPerUser = 1, 5
		b, err := json.Marshal(forged)
		if err != nil {
			t.Fatal(err)
		}
		rc := r.redis.Client(t)
		for _, cmd := range [][]string{
			{"SET", sale.ActivityKey(actID), string(b)},
			{"HSET", sale.KeysFor(actID, skuID).Meta, "price", "1", "limit", "5"},
		} {
			if err := rc.Do(ctx, rc.B().Arbitrary(cmd...).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.stock.Catalog().Load(ctx); err != nil {
			t.Fatal(err)
		}
		if _, k, ok := r.stock.Catalog().Lookup(actID, skuID); !ok || k.Price != 1 {
			t.Fatalf("the rewrite did not reach the catalog copy: %+v %v", k, ok)
		}
		m.UnitPrice = 1
		over := r.occupy(t, skuID, 32)
		over.Quantity = 5
		r.produce(t, m, over)
		r.start(t)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("result %+v", e)
		}
		o, err := r.st.OrderByRequest(ctx, m.RequestNo)
		if err != nil || o.UnitPrice != 990 || o.Amount != 990 {
			t.Fatalf("order %+v, %v: want the database's 9.90", o, err)
		}
		dl := r.readDLQ(t, 1)
		if reason := header(dl[0], HeaderReason); reason != "quantity 5 above the per-user limit 1 of activity 7 sku 7001" {
			t.Fatalf("letter reason %q", reason)
		}
		if _, err := r.st.OrderByRequest(ctx, over.RequestNo); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("an order for 5 units: %v", err)
		}
	})
}

// TestPriceChangedInTheDatabaseWinsAfterTheTTL: the consumer's copy of a
// SKU's row answers for price_ttl; a price the database changed mid-sale
// prices what is read after it, and an unknown SKU stays unknown.
func TestPriceChangedInTheDatabaseWinsAfterTheTTL(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		p := newPrices(r.st, 5*time.Second)
		now := time.Unix(1000, 0)
		p.now = func() time.Time { return now }
		tk := []*ticket{{m: sale.Message{ActivityID: actID, SKUID: skuID}}, {m: sale.Message{ActivityID: actID, SKUID: 99}}}
		price := func() sale.Cents {
			t.Helper()
			if err := p.load(ctx, tk); err != nil {
				t.Fatal(err)
			}
			if _, ok := p.get(actID, 99); ok {
				t.Fatal("an unknown SKU is priced")
			}
			k, ok := p.get(actID, skuID)
			if !ok {
				t.Fatal("the SKU is unknown")
			}
			return k.Price
		}
		if got := price(); got != 990 {
			t.Fatalf("price %d, want 990", got)
		}
		changed := r.act
		changed.SKUs = append([]sale.SKU(nil), r.act.SKUs...)
		changed.SKUs[0].Price = 1500
		if err := r.st.PutActivity(ctx, changed); err != nil {
			t.Fatal(err)
		}
		now = now.Add(4 * time.Second)
		if got := price(); got != 990 {
			t.Fatalf("price %d within the TTL, want the copy's 990", got)
		}
		now = now.Add(time.Second)
		if got := price(); got != 1500 {
			t.Fatalf("price %d after the TTL, want the database's 1500", got)
		}
	})
}

// itemDownStore fails Item while down is set.
type itemDownStore struct {
	store.Store
	down  atomic.Bool
	calls atomic.Int32
}

func (s *itemDownStore) Item(ctx context.Context, a, k int64) (sale.SKU, error) {
	s.calls.Add(1)
	if s.down.Load() {
		return sale.SKU{}, errDown
	}
	return s.Store.Item(ctx, a, k)
}

// TestUnreadablePriceFailsNoTicket: while the database cannot answer the
// price, the batch stays uncommitted (no ticket failed, no stock given
// back); once it answers, the order is made at its price.
func TestUnreadablePriceFailsNoTicket(t *testing.T) {
	t.Parallel()
	runTest(t, func(t *testing.T, r *rig) {
		s := &itemDownStore{Store: r.st}
		s.down.Store(true)
		r.st = s
		m := r.occupy(t, skuID, 41)
		r.produce(t, m)
		c := r.start(t)
		eventually(t, "a redelivery", func() bool { return s.calls.Load() > int32(2*(c.cfg.Retries+1)) })
		if e, err := r.res.Read(context.Background(), m.UserID, m.RequestNo); err != nil || e.State != sale.ResultQueuing {
			t.Errorf("the ticket did not stay QUEUING while the price was unreadable: %+v %v", e, err)
		}
		if got := r.committed(t, c.cfg.Group); got != 0 {
			t.Errorf("offsets committed while the price was unreadable: %d", got)
		}
		s.down.Store(false)
		if e := r.result(t, m.RequestNo); e.State != sale.ResultSuccess {
			t.Fatalf("result %+v", e)
		}
		if got := count(t, r, outFailed); got != 0 {
			t.Errorf("failed = %d, want 0", got)
		}
	})
}
