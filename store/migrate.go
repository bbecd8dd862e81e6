package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrateLive brings a seckill_order table made before the live flag up to
// date: the column is added (NULL for CLOSED orders, 1 for the others) and
// the unique key (activity_id, sku_id, user_id) becomes (…, live), so that a
// closed order no longer blocks its buyer's next one. A table that has the
// column already is left alone, so this runs at every start.
func (s *sqlStore) migrateLive(ctx context.Context) error {
	has, err := s.hasColumn(ctx, "seckill_order", "live")
	if err != nil || has {
		return err
	}
	if s.d.name == "mysql" {
		_, err := s.w.ExecContext(ctx, `ALTER TABLE seckill_order
			ADD COLUMN live TINYINT NULL DEFAULT 1,
			DROP INDEX uk_activity_sku_user,
			ADD UNIQUE KEY uk_activity_sku_user_live (activity_id, sku_id, user_id, live)`)
		if err != nil {
			// Another process may have migrated meanwhile.
			if has, herr := s.hasColumn(ctx, "seckill_order", "live"); herr == nil && has {
				return nil
			}
			return fmt.Errorf("add seckill_order.live: %w", err)
		}
		if _, err := s.w.ExecContext(ctx, `UPDATE seckill_order SET live = NULL WHERE status = ?`, OrderClosed); err != nil {
			return fmt.Errorf("fill seckill_order.live: %w", err)
		}
		return nil
	}
	// SQLite cannot drop a table's unique constraint: copy the rows into a
	// table of the new shape and swap it in, in one transaction.
	return s.inTx(ctx, func(tx *sql.Tx) error {
		stmts := []string{
			fmt.Sprintf(sqliteOrderTable, "seckill_order_live"),
			`INSERT INTO seckill_order_live (id, order_no, request_no, activity_id, sku_id, user_id, quantity,
				unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms, live)
			SELECT id, order_no, request_no, activity_id, sku_id, user_id, quantity,
				unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms,
				CASE WHEN status = '` + OrderClosed + `' THEN NULL ELSE 1 END FROM seckill_order`,
			`DROP TABLE seckill_order`,
			`ALTER TABLE seckill_order_live RENAME TO seckill_order`,
			sqliteOrderIndex,
		}
		for _, q := range stmts {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("migrate seckill_order to the live flag: %w", err)
			}
		}
		return nil
	})
}

// migrateRebuy adds flash_sale_activity.rebuy_after_close to a table made
// before the column, with its default (1: a buyer whose order was closed
// may buy again) on every existing row. Activities written by a build that
// knew the switch but not the column kept it only in Redis: see the
// operations ledger ("Re-buy after a close") for putting them again.
func (s *sqlStore) migrateRebuy(ctx context.Context) error {
	return s.addColumn(ctx, "flash_sale_activity", "rebuy_after_close", "INTEGER NOT NULL DEFAULT 1", "TINYINT NOT NULL DEFAULT 1")
}

// migrateHotShard adds flash_sale_item.hot_shard (NULL: the placement
// rule decides) to a table made before several hot shards.
func (s *sqlStore) migrateHotShard(ctx context.Context) error {
	return s.addColumn(ctx, "flash_sale_item", "hot_shard", "INTEGER NULL", "INT NULL")
}

// migrateBuckets adds flash_sale_item.buckets (0: the SKU is one ledger)
// and hot_shards (the buckets' pinned hot shards, comma separated) to a
// table made before buckets.
func (s *sqlStore) migrateBuckets(ctx context.Context) error {
	if err := s.addColumn(ctx, "flash_sale_item", "buckets", "INTEGER NOT NULL DEFAULT 0", "INT NOT NULL DEFAULT 0"); err != nil {
		return err
	}
	return s.addColumn(ctx, "flash_sale_item", "hot_shards", "TEXT NOT NULL DEFAULT ''", "VARCHAR(512) NOT NULL DEFAULT ''")
}

// migrateMode adds flash_sale_item.mode and drain_rate (the SKU's queue
// mode and the drainer's pace; empty and 0: direct, as fast as the shard
// allows) to a table made before them.
func (s *sqlStore) migrateMode(ctx context.Context) error {
	if err := s.addColumn(ctx, "flash_sale_item", "mode", "TEXT NOT NULL DEFAULT ''", "VARCHAR(8) NOT NULL DEFAULT ''"); err != nil {
		return err
	}
	return s.addColumn(ctx, "flash_sale_item", "drain_rate", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0")
}

// migratePrequeue adds flash_sale_activity.prequeue_min (the activity's
// pre-queue in minutes; 0: none) to a table made before it.
func (s *sqlStore) migratePrequeue(ctx context.Context) error {
	return s.addColumn(ctx, "flash_sale_activity", "prequeue_min", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0")
}

// migrateRiskOnError adds flash_sale_activity.risk_on_error (the
// activity's risk policy; empty: the edges' edge.risk.on_error) to a table
// made before the policy was kept in the database.
func (s *sqlStore) migrateRiskOnError(ctx context.Context) error {
	return s.addColumn(ctx, "flash_sale_activity", "risk_on_error", "TEXT NOT NULL DEFAULT ''", "VARCHAR(8) NOT NULL DEFAULT ''")
}

// migrateDegrade adds the degrade switches of flash_sale_activity
// (reserved_only, poll_after_ms, paused; all 0: no degrade) to a table made
// before them.
func (s *sqlStore) migrateDegrade(ctx context.Context) error {
	for _, c := range [...][3]string{
		{"reserved_only", "INTEGER NOT NULL DEFAULT 0", "TINYINT NOT NULL DEFAULT 0"},
		{"poll_after_ms", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0"},
		{"paused", "INTEGER NOT NULL DEFAULT 0", "TINYINT NOT NULL DEFAULT 0"},
	} {
		if err := s.addColumn(ctx, "flash_sale_activity", c[0], c[1], c[2]); err != nil {
			return err
		}
	}
	return nil
}

// addColumn adds column (of type sqliteType or mysqlType) to table when the
// table lacks it, and leaves a table that has it alone, so the migrations
// run at every start; both dialects add a column in place, existing rows
// taking its default.
func (s *sqlStore) addColumn(ctx context.Context, table, column, sqliteType, mysqlType string) error {
	has, err := s.hasColumn(ctx, table, column)
	if err != nil || has {
		return err
	}
	typ := sqliteType
	if s.d.name == "mysql" {
		typ = mysqlType
	}
	if _, err := s.w.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+column+` `+typ); err != nil {
		// Another process may have migrated meanwhile.
		if has, herr := s.hasColumn(ctx, table, column); herr == nil && has {
			return nil
		}
		return fmt.Errorf("add %s.%s: %w", table, column, err)
	}
	return nil
}

// migrateUserIndex adds the index a buyer's orders are read by, (user_id,
// created_ms, id), to a seckill_order made before it. It runs after
// migrateLive, whose SQLite table copy drops the old table's indexes.
// SQLite creates it IF NOT EXISTS; MySQL 8 has no such clause, so a table
// that has the index already is left alone. Either way this runs at every
// start.
func (s *sqlStore) migrateUserIndex(ctx context.Context) error {
	if s.d.name != "mysql" {
		if _, err := s.w.ExecContext(ctx, sqliteOrderUserIndex); err != nil {
			return fmt.Errorf("add idx_order_user_created: %w", err)
		}
		return nil
	}
	has, err := s.hasIndex(ctx, "seckill_order", "idx_user_created")
	if err != nil || has {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `ALTER TABLE seckill_order
		ADD KEY idx_user_created (user_id, created_ms, id)`); err != nil {
		// Another process may have migrated meanwhile.
		if has, herr := s.hasIndex(ctx, "seckill_order", "idx_user_created"); herr == nil && has {
			return nil
		}
		return fmt.Errorf("add seckill_order.idx_user_created: %w", err)
	}
	return nil
}

// hasIndex reports whether table has an index named name.
func (s *sqlStore) hasIndex(ctx context.Context, table, name string) (bool, error) {
	q := `SELECT COUNT(*) FROM pragma_index_list(?) WHERE name = ?`
	if s.d.name == "mysql" {
		q = `SELECT COUNT(*) FROM information_schema.STATISTICS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?`
	}
	var n int
	if err := s.w.QueryRowContext(ctx, q, table, name).Scan(&n); err != nil {
		return false, fmt.Errorf("inspect %s: %w", table, err)
	}
	return n > 0, nil
}

// hasColumn reports whether table has column col.
func (s *sqlStore) hasColumn(ctx context.Context, table, col string) (bool, error) {
	q := `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`
	if s.d.name == "mysql" {
		q = `SELECT COUNT(*) FROM information_schema.COLUMNS
			WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?`
	}
	var n int
	if err := s.w.QueryRowContext(ctx, q, table, col).Scan(&n); err != nil {
		return false, fmt.Errorf("inspect %s: %w", table, err)
	}
	return n > 0, nil
}

// migrateProduct adds a SKU's product data, flash_sale_item.title and
// original_price_cents (empty and 0: none), and seckill_order.source (the
// channel an order came from, 'SECKILL' for every order this system
// makes), to tables made before them.
func (s *sqlStore) migrateProduct(ctx context.Context) error {
	if err := s.addColumn(ctx, "flash_sale_item", "title", "TEXT NOT NULL DEFAULT ''", "VARCHAR(256) NOT NULL DEFAULT ''"); err != nil {
		return err
	}
	if err := s.addColumn(ctx, "flash_sale_item", "original_price_cents", "INTEGER NOT NULL DEFAULT 0", "BIGINT NOT NULL DEFAULT 0"); err != nil {
		return err
	}
	return s.addColumn(ctx, "seckill_order", "source", "TEXT NOT NULL DEFAULT 'SECKILL'", "VARCHAR(16) NOT NULL DEFAULT 'SECKILL'")
}

// migrateLogIndex adds seckill_request_log.message_id (the Kafka message
// a ticket's order came from) and the index a buyer's requests are read
// by, (user_id, activity_id, created_ms), to a request log made before
// them. Like migrateUserIndex it runs at every start.
func (s *sqlStore) migrateLogIndex(ctx context.Context) error {
	if err := s.addColumn(ctx, "seckill_request_log", "message_id", "TEXT NOT NULL DEFAULT ''", "VARCHAR(64) NOT NULL DEFAULT ''"); err != nil {
		return err
	}
	if s.d.name != "mysql" {
		if _, err := s.w.ExecContext(ctx, sqliteLogUserIndex); err != nil {
			return fmt.Errorf("add idx_log_user_activity: %w", err)
		}
		return nil
	}
	has, err := s.hasIndex(ctx, "seckill_request_log", "idx_user_activity")
	if err != nil || has {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `ALTER TABLE seckill_request_log
		ADD KEY idx_user_activity (user_id, activity_id, created_ms)`); err != nil {
		if has, herr := s.hasIndex(ctx, "seckill_request_log", "idx_user_activity"); herr == nil && has {
			return nil
		}
		return fmt.Errorf("add seckill_request_log.idx_user_activity: %w", err)
	}
	return nil
}
