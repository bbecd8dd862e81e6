package store

// The schema, one list of statements per dialect, same logical tables and
// keys on both. Times are unix milliseconds (BIGINT), money is cents
// (BIGINT). Every statement is idempotent, so migrating twice (or from two
// processes) is fine. Tables made by an older schema are brought up to
// date by migrate.go.

import "fmt"

var mysqlSchema = []string{
	`CREATE TABLE IF NOT EXISTS flash_sale_activity (
		id            BIGINT      NOT NULL PRIMARY KEY,
		start_ms      BIGINT      NOT NULL,
		end_ms        BIGINT      NOT NULL,
		state         VARCHAR(16) NOT NULL,
		require_token TINYINT     NOT NULL DEFAULT 0,
		updated_ms    BIGINT      NOT NULL,
		rebuy_after_close TINYINT NOT NULL DEFAULT 1,
		risk_on_error VARCHAR(8)  NOT NULL DEFAULT '',
		reserved_only TINYINT     NOT NULL DEFAULT 0,
		poll_after_ms BIGINT      NOT NULL DEFAULT 0,
		paused        TINYINT     NOT NULL DEFAULT 0,
		prequeue_min  BIGINT      NOT NULL DEFAULT 0
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS flash_sale_item (
		activity_id    BIGINT  NOT NULL,
		sku_id         BIGINT  NOT NULL,
		price_cents    BIGINT  NOT NULL,
		stock          BIGINT  NOT NULL,
		limit_per_user BIGINT  NOT NULL,
		hot            TINYINT NOT NULL DEFAULT 0,
		hot_shard      INT     NULL,
		buckets        INT     NOT NULL DEFAULT 0,
		hot_shards     VARCHAR(512) NOT NULL DEFAULT '',
		title          VARCHAR(256) NOT NULL DEFAULT '',
		original_price_cents BIGINT NOT NULL DEFAULT 0,
		mode           VARCHAR(8) NOT NULL DEFAULT '',
		drain_rate     BIGINT  NOT NULL DEFAULT 0,
		PRIMARY KEY (activity_id, sku_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS seckill_order (
		id               BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
		order_no         VARCHAR(80)  NOT NULL,
		request_no       VARCHAR(64)  NOT NULL,
		activity_id      BIGINT       NOT NULL,
		sku_id           BIGINT       NOT NULL,
		user_id          BIGINT       NOT NULL,
		quantity         BIGINT       NOT NULL,
		unit_price_cents BIGINT       NOT NULL,
		amount_cents     BIGINT       NOT NULL,
		status           VARCHAR(32)  NOT NULL,
		trace_id         VARCHAR(128) NOT NULL DEFAULT '',
		created_ms       BIGINT       NOT NULL,
		updated_ms       BIGINT       NOT NULL,
		live             TINYINT      NULL DEFAULT 1,
		source           VARCHAR(16)  NOT NULL DEFAULT 'SECKILL',
		UNIQUE KEY uk_order_no (order_no),
		UNIQUE KEY uk_request_no (request_no),
		UNIQUE KEY uk_activity_sku_user_live (activity_id, sku_id, user_id, live),
		KEY idx_status_created (status, created_ms),
		KEY idx_user_created (user_id, created_ms, id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS seckill_request_log (
		id          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
		request_no  VARCHAR(64)  NOT NULL,
		activity_id BIGINT       NOT NULL,
		sku_id      BIGINT       NOT NULL,
		user_id     BIGINT       NOT NULL,
		quantity    BIGINT       NOT NULL,
		status      VARCHAR(32)  NOT NULL,
		order_no    VARCHAR(80)  NOT NULL DEFAULT '',
		trace_id    VARCHAR(128) NOT NULL DEFAULT '',
		remark      VARCHAR(255) NOT NULL DEFAULT '',
		created_ms  BIGINT       NOT NULL,
		updated_ms  BIGINT       NOT NULL,
		message_id  VARCHAR(64)  NOT NULL DEFAULT '',
		UNIQUE KEY uk_request_no (request_no),
		KEY idx_user_activity (user_id, activity_id, created_ms)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// The edge's free rejections (DESIGN §7): one counter per activity,
	// SKU, reason and minute, added to by the request-log writer's
	// flushes instead of one row per refused request.
	`CREATE TABLE IF NOT EXISTS seckill_reject_minute (
		activity_id BIGINT      NOT NULL,
		sku_id      BIGINT      NOT NULL,
		reason      VARCHAR(32) NOT NULL,
		minute_ms   BIGINT      NOT NULL,
		n           BIGINT      NOT NULL,
		PRIMARY KEY (activity_id, sku_id, reason, minute_ms)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS seckill_stock_snapshot (
		activity_id BIGINT NOT NULL,
		sku_id      BIGINT NOT NULL,
		initial     BIGINT NOT NULL,
		available   BIGINT NOT NULL,
		sold        BIGINT NOT NULL,
		version     BIGINT NOT NULL,
		PRIMARY KEY (activity_id, sku_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS seckill_request_event (
		id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
		request_no VARCHAR(64)  NOT NULL,
		status     VARCHAR(32)  NOT NULL,
		remark     VARCHAR(255) NOT NULL DEFAULT '',
		created_ms BIGINT       NOT NULL,
		KEY idx_request (request_no, id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS seckill_release_pending (
		request_no  VARCHAR(64) NOT NULL PRIMARY KEY,
		order_no    VARCHAR(80) NOT NULL,
		activity_id BIGINT      NOT NULL,
		sku_id      BIGINT      NOT NULL,
		user_id     BIGINT      NOT NULL,
		quantity    BIGINT      NOT NULL,
		created_ms  BIGINT      NOT NULL,
		done_ms     BIGINT      NOT NULL DEFAULT 0,
		KEY idx_done_created (done_ms, created_ms)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	`CREATE TABLE IF NOT EXISTS flash_sale_reserved_user (
		activity_id BIGINT NOT NULL,
		user_id     BIGINT NOT NULL,
		PRIMARY KEY (activity_id, user_id)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// One row per payment a provider confirmed: its reference is unique, so
	// a reference pays one order once.
	`CREATE TABLE IF NOT EXISTS seckill_payment (
		provider_ref VARCHAR(64) NOT NULL PRIMARY KEY,
		order_no     VARCHAR(80) NOT NULL,
		amount_cents BIGINT      NOT NULL,
		created_ms   BIGINT      NOT NULL,
		KEY idx_payment_order (order_no)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// Messages the consumer could neither process nor send to the
	// dead-letter topic (store/deadletter.go), at most one row per
	// message: the offset can be committed once the row is.
	`CREATE TABLE IF NOT EXISTS seckill_dead_letter (
		id            BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
		topic         VARCHAR(249) NOT NULL,
		msg_partition INT          NOT NULL,
		msg_offset    BIGINT       NOT NULL,
		msg_key       BLOB         NOT NULL,
		payload       BLOB         NOT NULL,
		size_bytes    BIGINT       NOT NULL,
		digest        VARCHAR(64)  NOT NULL,
		reason        VARCHAR(255) NOT NULL DEFAULT '',
		request_no    VARCHAR(64)  NOT NULL DEFAULT '',
		created_ms    BIGINT       NOT NULL,
		UNIQUE KEY uk_dead_letter_source (topic, msg_partition, msg_offset)
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
	// On-call's route switches (package routeswitch), one row per route
	// ever switched.
	`CREATE TABLE IF NOT EXISTS seckill_route_switch (
		name       VARCHAR(32) NOT NULL PRIMARY KEY,
		open       TINYINT     NOT NULL,
		updated_ms BIGINT      NOT NULL
	) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`,
}

var sqliteSchema = []string{
	`CREATE TABLE IF NOT EXISTS flash_sale_activity (
		id            INTEGER NOT NULL PRIMARY KEY,
		start_ms      INTEGER NOT NULL,
		end_ms        INTEGER NOT NULL,
		state         TEXT    NOT NULL,
		require_token INTEGER NOT NULL DEFAULT 0,
		updated_ms    INTEGER NOT NULL,
		rebuy_after_close INTEGER NOT NULL DEFAULT 1,
		risk_on_error TEXT    NOT NULL DEFAULT '',
		reserved_only INTEGER NOT NULL DEFAULT 0,
		poll_after_ms INTEGER NOT NULL DEFAULT 0,
		paused        INTEGER NOT NULL DEFAULT 0,
		prequeue_min  INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS flash_sale_item (
		activity_id    INTEGER NOT NULL,
		sku_id         INTEGER NOT NULL,
		price_cents    INTEGER NOT NULL,
		stock          INTEGER NOT NULL,
		limit_per_user INTEGER NOT NULL,
		hot            INTEGER NOT NULL DEFAULT 0,
		hot_shard      INTEGER NULL,
		buckets        INTEGER NOT NULL DEFAULT 0,
		hot_shards     TEXT    NOT NULL DEFAULT '',
		title          TEXT    NOT NULL DEFAULT '',
		original_price_cents INTEGER NOT NULL DEFAULT 0,
		mode           TEXT    NOT NULL DEFAULT '',
		drain_rate     INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (activity_id, sku_id)
	)`,
	fmt.Sprintf(sqliteOrderTable, "seckill_order"),
	sqliteOrderIndex,
	sqliteOrderUserIndex,
	`CREATE TABLE IF NOT EXISTS seckill_request_log (
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		request_no  TEXT    NOT NULL UNIQUE,
		activity_id INTEGER NOT NULL,
		sku_id      INTEGER NOT NULL,
		user_id     INTEGER NOT NULL,
		quantity    INTEGER NOT NULL,
		status      TEXT    NOT NULL,
		order_no    TEXT    NOT NULL DEFAULT '',
		trace_id    TEXT    NOT NULL DEFAULT '',
		remark      TEXT    NOT NULL DEFAULT '',
		created_ms  INTEGER NOT NULL,
		updated_ms  INTEGER NOT NULL,
		message_id  TEXT    NOT NULL DEFAULT ''
	)`,
	`CREATE TABLE IF NOT EXISTS seckill_reject_minute (
		activity_id INTEGER NOT NULL,
		sku_id      INTEGER NOT NULL,
		reason      TEXT    NOT NULL,
		minute_ms   INTEGER NOT NULL,
		n           INTEGER NOT NULL,
		PRIMARY KEY (activity_id, sku_id, reason, minute_ms)
	)`,
	`CREATE TABLE IF NOT EXISTS seckill_stock_snapshot (
		activity_id INTEGER NOT NULL,
		sku_id      INTEGER NOT NULL,
		initial     INTEGER NOT NULL,
		available   INTEGER NOT NULL,
		sold        INTEGER NOT NULL,
		version     INTEGER NOT NULL,
		PRIMARY KEY (activity_id, sku_id)
	)`,
	`CREATE TABLE IF NOT EXISTS seckill_request_event (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		request_no TEXT    NOT NULL,
		status     TEXT    NOT NULL,
		remark     TEXT    NOT NULL DEFAULT '',
		created_ms INTEGER NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS idx_event_request ON seckill_request_event (request_no, id)`,
	`CREATE TABLE IF NOT EXISTS seckill_release_pending (
		request_no  TEXT    NOT NULL PRIMARY KEY,
		order_no    TEXT    NOT NULL,
		activity_id INTEGER NOT NULL,
		sku_id      INTEGER NOT NULL,
		user_id     INTEGER NOT NULL,
		quantity    INTEGER NOT NULL,
		created_ms  INTEGER NOT NULL,
		done_ms     INTEGER NOT NULL DEFAULT 0
	)`,
	`CREATE INDEX IF NOT EXISTS idx_release_done_created ON seckill_release_pending (done_ms, created_ms)`,
	`CREATE TABLE IF NOT EXISTS flash_sale_reserved_user (
		activity_id INTEGER NOT NULL,
		user_id     INTEGER NOT NULL,
		PRIMARY KEY (activity_id, user_id)
	)`,
	`CREATE TABLE IF NOT EXISTS seckill_payment (
		provider_ref TEXT    NOT NULL PRIMARY KEY,
		order_no     TEXT    NOT NULL,
		amount_cents INTEGER NOT NULL,
		created_ms   INTEGER NOT NULL
	)`,
	`CREATE INDEX IF NOT EXISTS idx_payment_order ON seckill_payment (order_no)`,
	`CREATE TABLE IF NOT EXISTS seckill_dead_letter (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		topic         TEXT    NOT NULL,
		msg_partition INTEGER NOT NULL,
		msg_offset    INTEGER NOT NULL,
		msg_key       BLOB    NOT NULL,
		payload       BLOB    NOT NULL,
		size_bytes    INTEGER NOT NULL,
		digest        TEXT    NOT NULL,
		reason        TEXT    NOT NULL DEFAULT '',
		request_no    TEXT    NOT NULL DEFAULT '',
		created_ms    INTEGER NOT NULL,
		UNIQUE (topic, msg_partition, msg_offset)
	)`,
	`CREATE TABLE IF NOT EXISTS seckill_route_switch (
		name       TEXT    NOT NULL PRIMARY KEY,
		open       INTEGER NOT NULL,
		updated_ms INTEGER NOT NULL
	)`,
}

// sqliteOrderTable is seckill_order's definition (the table name is a
// parameter: the live-flag migration builds a copy under another name).
// live is 1 for an order that holds stock and NULL once it is CLOSED; the
// unique key over it lets a buyer whose order was closed order again, while
// two live orders of one user on one SKU stay impossible (NULLs are
// distinct in a unique index, in SQLite as in MySQL).
const sqliteOrderTable = `CREATE TABLE IF NOT EXISTS %s (
		id               INTEGER PRIMARY KEY AUTOINCREMENT,
		order_no         TEXT    NOT NULL UNIQUE,
		request_no       TEXT    NOT NULL UNIQUE,
		activity_id      INTEGER NOT NULL,
		sku_id           INTEGER NOT NULL,
		user_id          INTEGER NOT NULL,
		quantity         INTEGER NOT NULL,
		unit_price_cents INTEGER NOT NULL,
		amount_cents     INTEGER NOT NULL,
		status           TEXT    NOT NULL,
		trace_id         TEXT    NOT NULL DEFAULT '',
		created_ms       INTEGER NOT NULL,
		updated_ms       INTEGER NOT NULL,
		live             INTEGER DEFAULT 1,
		source           TEXT    NOT NULL DEFAULT 'SECKILL',
		UNIQUE (activity_id, sku_id, user_id, live)
	)`

const sqliteOrderIndex = `CREATE INDEX IF NOT EXISTS idx_order_status_created ON seckill_order (status, created_ms)`

// sqliteOrderUserIndex serves a buyer's orders, newest first
// (UserOrders); the MySQL table has it as idx_user_created. Tables made
// before it get it from migrateUserIndex.
const sqliteOrderUserIndex = `CREATE INDEX IF NOT EXISTS idx_order_user_created ON seckill_order (user_id, created_ms, id)`

// sqliteLogUserIndex serves a buyer's requests, newest first
// (UserRequests); the MySQL table has it as idx_user_activity. Tables made
// before it get it from migrateLogIndex.
const sqliteLogUserIndex = `CREATE INDEX IF NOT EXISTS idx_log_user_activity ON seckill_request_log (user_id, activity_id, created_ms)`
