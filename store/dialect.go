package store

import "database/sql"

// dialect is what differs between the two databases; everything else is
// shared SQL with "?" placeholders.
type dialect struct {
	name   string
	schema []string
	// insertIgnore starts an insert that skips rows violating a unique key.
	insertIgnore string
	// forUpdate ends a SELECT that must lock the rows it reads. SQLite
	// needs none: its write transactions are serialised (BEGIN IMMEDIATE
	// on one writer connection).
	forUpdate string
	// logUpsert ends the request-log insert: on a duplicate requestNo it
	// updates status, order_no, remark and updated_ms, and message_id
	// when the new step names one.
	logUpsert string
	// storyUpsert goes on from logUpsert for SaveBatch's rows: it sets
	// the story columns too (story.go).
	storyUpsert string
	// activityUpsert and itemUpsert end the activity and item inserts.
	activityUpsert string
	itemUpsert     string
	// rejectUpsert ends the minute-counter insert: on a duplicate
	// (activity, sku, reason, minute) it adds the count.
	rejectUpsert string
	// txOptions are the write transactions' options.
	txOptions *sql.TxOptions
	// readTx are the options of a read that must see one consistent state
	// across statements (Ledger). SQLite runs it on the writer connection,
	// where a transaction excludes writers for its short duration.
	readTx *sql.TxOptions
}

// MySQL runs batches at READ COMMITTED so that the existing-order check,
// made after the snapshot rows are locked, sees every order committed
// before the lock was granted.
var mysqlDialect = dialect{
	name:         "mysql",
	schema:       mysqlSchema,
	insertIgnore: "INSERT IGNORE INTO",
	forUpdate:    " FOR UPDATE",
	logUpsert: ` ON DUPLICATE KEY UPDATE status = VALUES(status), order_no = VALUES(order_no),
		remark = VALUES(remark), updated_ms = VALUES(updated_ms),
		message_id = IF(VALUES(message_id) <> '', VALUES(message_id), message_id)`,
	storyUpsert: `, queued_ms = VALUES(queued_ms), decided_ms = VALUES(decided_ms),
		decided = VALUES(decided), decided_remark = VALUES(decided_remark)`,
	activityUpsert: ` ON DUPLICATE KEY UPDATE start_ms = VALUES(start_ms), end_ms = VALUES(end_ms),
		state = VALUES(state), require_token = VALUES(require_token),
		rebuy_after_close = VALUES(rebuy_after_close), risk_on_error = VALUES(risk_on_error),
		reserved_only = VALUES(reserved_only), poll_after_ms = VALUES(poll_after_ms), paused = VALUES(paused),
		prequeue_min = VALUES(prequeue_min), updated_ms = VALUES(updated_ms)`,
	itemUpsert: ` ON DUPLICATE KEY UPDATE price_cents = VALUES(price_cents), stock = VALUES(stock),
		limit_per_user = VALUES(limit_per_user), hot = VALUES(hot),
		hot_shard = VALUES(hot_shard), title = VALUES(title), original_price_cents = VALUES(original_price_cents),
		buckets = VALUES(buckets), hot_shards = VALUES(hot_shards), mode = VALUES(mode), drain_rate = VALUES(drain_rate)`,
	rejectUpsert: ` ON DUPLICATE KEY UPDATE n = n + VALUES(n)`,
	txOptions:    &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	readTx:       &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
}

var sqliteDialect = dialect{
	name:         "sqlite",
	schema:       sqliteSchema,
	insertIgnore: "INSERT OR IGNORE INTO",
	logUpsert: ` ON CONFLICT (request_no) DO UPDATE SET status = excluded.status,
		order_no = excluded.order_no, remark = excluded.remark, updated_ms = excluded.updated_ms,
		message_id = CASE WHEN excluded.message_id <> '' THEN excluded.message_id ELSE message_id END`,
	storyUpsert: `, queued_ms = excluded.queued_ms, decided_ms = excluded.decided_ms,
		decided = excluded.decided, decided_remark = excluded.decided_remark`,
	activityUpsert: ` ON CONFLICT (id) DO UPDATE SET start_ms = excluded.start_ms, end_ms = excluded.end_ms,
		state = excluded.state, require_token = excluded.require_token,
		rebuy_after_close = excluded.rebuy_after_close, risk_on_error = excluded.risk_on_error,
		reserved_only = excluded.reserved_only, poll_after_ms = excluded.poll_after_ms, paused = excluded.paused,
		prequeue_min = excluded.prequeue_min, updated_ms = excluded.updated_ms`,
	itemUpsert: ` ON CONFLICT (activity_id, sku_id) DO UPDATE SET price_cents = excluded.price_cents,
		stock = excluded.stock, limit_per_user = excluded.limit_per_user, hot = excluded.hot,
		hot_shard = excluded.hot_shard, title = excluded.title, original_price_cents = excluded.original_price_cents,
		buckets = excluded.buckets, hot_shards = excluded.hot_shards, mode = excluded.mode, drain_rate = excluded.drain_rate`,
	rejectUpsert: ` ON CONFLICT (activity_id, sku_id, reason, minute_ms) DO UPDATE SET n = n + excluded.n`,
}
