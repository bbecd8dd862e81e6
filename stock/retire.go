package stock

import (
	"context"
	"fmt"

	"seckill/sale"
)

// Keys lists every key of SKU (activity, sku) on its shard, the ones
// Expire removes: meta, stock, sold, users, claimed, closed, qty, pending
// and the results hash. They share one hash tag, so one command reaches
// them all, in a cluster too. The user × SKU window counters
// (sale.RateKey) are not listed: each expires with its window.
func Keys(activity, sku int64) []string {
	k := sale.KeysFor(activity, sku)
	return []string{k.Meta, k.Stock, k.Sold, k.Users, k.Claim, k.Closed, k.Qty, k.Pending, k.Results}
}

// Expire removes the keys of SKU (activity, sku) (Keys, and each bucket's
// with its transfer record for a SKU split into buckets) from every Redis
// deployment — the SKU's own shard and any other it may have lived on
// before a move — with one UNLINK each (the memory is given back off the
// main thread). It is for a SKU whose sale ended and whose every ticket
// the database holds (the reconciler decides). Idempotent; it returns how
// many keys went.
func (s *Stock) Expire(ctx context.Context, activity int64, sku *sale.SKU) (int64, error) {
	sets := [][]string{Keys(activity, sku.ID)}
	for _, b := range sku.BucketIndexes() {
		if b >= 0 {
			// Each bucket is a slot of its own: one UNLINK per bucket.
			k := sale.KeysIn(activity, sku.ID, b)
			sets = append(sets, []string{k.Meta, k.Stock, k.Sold, k.Users, k.Claim, k.Closed, k.Qty, k.Pending, k.Results,
				sale.TransfersKey(activity, sku.ID, b)})
		}
	}
	var n int64
	for _, idx := range s.deployments() {
		c := s.shards.Client(idx)
		for _, keys := range sets {
			m, err := c.Do(ctx, c.B().Unlink().Key(keys...).Build()).AsInt64()
			if err != nil {
				return n, fmt.Errorf("expire activity %d sku %d on %s: %w", activity, sku.ID, s.shards.Name(idx), err)
			}
			n += m
		}
	}
	return n, nil
}

// deployments lists each Redis deployment once (Place's indexes): the
// default and every hot shard apart from it.
func (s *Stock) deployments() []int {
	out := []int{-1}
	for i := 0; i < s.shards.HotCount(); i++ {
		if s.shards.Apart(i) {
			out = append(out, i)
		}
	}
	return out
}
