package stock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

var restockScript = rueidis.NewLuaScript(lua.Restock)

// SetSoldOut sets or clears the on-call sold-out mark of a SKU. While set,
// the occupy script answers SOLD_OUT whatever the stock; clearing it lets
// the remaining stock sell again. Every edge is told either way.
func (s *Stock) SetSoldOut(ctx context.Context, activity, sku int64, soldOut bool) error {
	// Every bucket of a SKU split into buckets carries the mark.
	for _, b := range s.bucketsOf(activity, sku) {
		c := s.shards.Client(s.shardIn(activity, sku, b))
		k := sale.KeysIn(activity, sku, b)
		var cmd rueidis.Completed
		if soldOut {
			cmd = c.B().Hset().Key(k.Meta).FieldValue().FieldValue("soldout", "1").Build()
		} else {
			cmd = c.B().Hdel().Key(k.Meta).Field("soldout").Build()
		}
		if err := c.Do(ctx, cmd).Error(); err != nil {
			return fmt.Errorf("sold-out mark activity %d sku %d: %w", activity, sku, err)
		}
	}
	kind := sale.EventSoldOut
	if !soldOut {
		n, err := s.Counts(ctx, activity, sku)
		if err != nil {
			return err
		}
		if n.Remaining <= 0 {
			// Nothing to sell: the flag stays true in fact.
			kind = sale.EventSoldOut
		} else {
			kind = sale.EventAvailable
		}
	}
	s.publish(ctx, sale.Event{Kind: kind, Activity: activity, SKU: sku})
	return nil
}

// SoldOutMarked reports whether on-call marked the SKU sold out.
func (s *Stock) SoldOutMarked(ctx context.Context, activity, sku int64) (bool, error) {
	b := s.bucketsOf(activity, sku)[0] // SetSoldOut marks every bucket
	c := s.shards.Client(s.shardIn(activity, sku, b))
	v, err := c.Do(ctx, c.B().Hget().Key(sale.KeysIn(activity, sku, b).Meta).Field("soldout").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return false, nil
	}
	return v == "1", err
}

// Restock adds n units to a live SKU in Redis (remaining and initial in one
// script, so concurrent occupancies are neither lost nor double counted) and
// tells the edges the SKU is available. The caller raises the database
// snapshot by the same n first. A bucket Redis lost is skipped (restock.lua
// refuses it): its rebuild gives it its share of the raised initial. When
// Redis lost the whole SKU nothing is written and the error is ErrLost:
// the rebuild from the database, raised first, sells the units — the
// restock is done, and must not be retried.
func (s *Stock) Restock(ctx context.Context, activity, sku, n int64) (remaining, initial int64, err error) {
	if n <= 0 {
		return 0, 0, fmt.Errorf("restock: units must be positive")
	}
	if _, _, ok := s.cat.Lookup(activity, sku); !ok {
		return 0, 0, fmt.Errorf("restock activity %d sku %d: %w", activity, sku, ErrUnknownSKU)
	}
	_, ks, _ := s.cat.Lookup(activity, sku)
	// A SKU split into buckets gets the units spread over them; remaining
	// and initial are the sums.
	var added, lost int64
	for _, b := range ks.BucketIndexes() {
		units := ks.BucketShare(n, b)
		if units == 0 {
			continue
		}
		k := sale.KeysIn(activity, sku, b)
		v, err := restockScript.Exec(ctx, s.bucketClient(activity, ks, b), []string{k.Meta, k.Stock}, []string{strconv.FormatInt(units, 10)}).AsIntSlice()
		if isMissing(err) {
			// Redis lost this bucket (or the SKU): the database's
			// initial, raised first, gives it its share when the
			// watcher rebuilds it.
			lost += units
			continue
		}
		if err != nil || len(v) != 2 {
			return 0, 0, fmt.Errorf("restock activity %d sku %d (%d of %d units added): %v", activity, sku, added, n, err)
		}
		added += units
		remaining, initial = remaining+v[0], initial+v[1]
	}
	if added == 0 && lost > 0 {
		return 0, 0, fmt.Errorf("restock activity %d sku %d: %w", activity, sku, ErrLost)
	}
	s.publish(ctx, sale.Event{Kind: sale.EventAvailable, Activity: activity, SKU: sku})
	return remaining, initial, nil
}

// isMissing reports whether err is a script's MISSING error reply: the
// SKU's or bucket's meta is gone (Redis lost it).
func isMissing(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "MISSING")
}
