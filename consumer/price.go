package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"seckill/sale"
	"seckill/store"
)

// prices is the consumer's copy of the orders database's catalog: what an
// order is priced at and how many units a user may hold. The copy of the
// catalog in Redis serves the sale, and anything that reaches Redis can
// write it; the database is the book of record, so an order's price and
// the per-user limit it is held to come from there, never from Redis or
// the message.
//
// Each SKU's row is read once and kept ttl (consumer.price_ttl): a price
// changed in the database mid-sale (a PutActivity, the admin's preheat)
// prices every batch processed from ttl after the change on — whatever the
// buyer's ticket or the Redis copy said when the buyer was accepted. A SKU
// the database does not know is remembered as unknown the same way. Safe
// for concurrent use (one batch per partition at a time).
type prices struct {
	st  store.Store
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[priceKey]priceEntry
}

type priceKey struct{ activity, sku int64 }

type priceEntry struct {
	sku   sale.SKU
	known bool // the database has the item
	at    time.Time
}

// maxPriceEntries bounds the copy: past it the next refresh starts afresh
// (rows are re-read, nothing is lost).
const maxPriceEntries = 1 << 16

func newPrices(st store.Store, ttl time.Duration) *prices {
	return &prices{st: st, ttl: ttl, now: time.Now, m: map[priceKey]priceEntry{}}
}

// load makes every ticket's SKU fresh (read within ttl). An error of the
// database leaves the batch uncommitted (redelivered): a ticket is never
// priced from a guess, nor failed because the database blinked.
func (p *prices) load(ctx context.Context, tickets []*ticket) error {
	now := p.now()
	for _, t := range tickets {
		k := priceKey{t.m.ActivityID, t.m.SKUID}
		p.mu.Lock()
		e, ok := p.m[k]
		p.mu.Unlock()
		if ok && now.Sub(e.at) < p.ttl {
			continue
		}
		sku, err := p.st.Item(ctx, k.activity, k.sku)
		switch {
		case errors.Is(err, store.ErrNotFound):
			e = priceEntry{at: now}
		case err != nil:
			return err
		default:
			e = priceEntry{sku: sku, known: true, at: now}
		}
		p.mu.Lock()
		if len(p.m) >= maxPriceEntries {
			clear(p.m)
		}
		p.m[k] = e
		p.mu.Unlock()
	}
	return nil
}

// get is the SKU as load last read it; ok is false when the database does
// not know it (or load has not read it).
func (p *prices) get(activity, sku int64) (sale.SKU, bool) {
	p.mu.Lock()
	e := p.m[priceKey{activity, sku}]
	p.mu.Unlock()
	return e.sku, e.known
}

// priceSKUs reads the database's row of every ticket's SKU the consumer
// does not hold fresh, retrying while the database fails.
func (c *Consumer) priceSKUs(ctx context.Context, tickets []*ticket) error {
	if err := c.retry(ctx, "read prices", func(ctx context.Context) error {
		return c.prices.load(ctx, tickets)
	}); err != nil {
		return fmt.Errorf("%w: %v", ErrUncommitted, err)
	}
	return nil
}
