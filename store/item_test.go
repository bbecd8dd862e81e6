package store

import (
	"context"
	"errors"
	"testing"

	"seckill/sale"
)

func TestItemIsWhatPutActivityLastWrote(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		shard := 1
		a := activity(1, sale.SKU{ID: 10, Stock: 5, Price: 1999, LimitPerUser: 2}, sale.SKU{ID: 11, Stock: 7, Price: 5, Hot: true, HotShard: &shard})
		put(t, s, a)
		ctx := context.Background()
		k, err := s.Item(ctx, 1, 10)
		if err != nil || k.Price != 1999 || k.LimitPerUser != 2 || k.Stock != 5 || k.Hot || k.HotShard != nil {
			t.Fatalf("Item(1, 10) = %+v, %v", k, err)
		}
		k, err = s.Item(ctx, 1, 11)
		if err != nil || k.Price != 5 || !k.Hot || k.HotShard == nil || *k.HotShard != 1 {
			t.Fatalf("Item(1, 11) = %+v, %v", k, err)
		}
		// A price changed by a later PutActivity is the one returned.
		a.SKUs[0].Price = 2999
		put(t, s, a)
		if k, err = s.Item(ctx, 1, 10); err != nil || k.Price != 2999 {
			t.Fatalf("after the change Item(1, 10) = %+v, %v", k, err)
		}
		for _, tc := range [][2]int64{{1, 12}, {2, 10}} {
			if _, err := s.Item(ctx, tc[0], tc[1]); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Item(%d, %d): %v, want ErrNotFound", tc[0], tc[1], err)
			}
		}
	})
}
