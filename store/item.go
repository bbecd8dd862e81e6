package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"seckill/sale"
)

// Item returns one SKU of an activity as the database holds it (price,
// per-user limit, hot placement; Stock is the item's configured stock), or
// ErrNotFound. The consumer prices orders from it: the database's
// catalog is the book of record, the copy in Redis only serves the sale.
func (s *sqlStore) Item(ctx context.Context, activity, sku int64) (sale.SKU, error) {
	var (
		k     = sale.SKU{ID: sku}
		price int64
		hot   int
		shard sql.NullInt32
	)
	err := s.r.QueryRowContext(ctx, `SELECT price_cents, stock, limit_per_user, hot, hot_shard FROM flash_sale_item
		WHERE activity_id = ? AND sku_id = ?`, activity, sku).Scan(&price, &k.Stock, &k.LimitPerUser, &hot, &shard)
	if errors.Is(err, sql.ErrNoRows) {
		return k, fmt.Errorf("item activity %d sku %d: %w", activity, sku, ErrNotFound)
	}
	if err != nil {
		return k, fmt.Errorf("item activity %d sku %d: %w", activity, sku, err)
	}
	k.Price, k.Hot = sale.Cents(price), hot != 0
	if shard.Valid {
		n := int(shard.Int32)
		k.HotShard = &n
	}
	return k, nil
}
