package benchkit

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "modernc.org/sqlite"

	"seckill/internal/testenv"
)

// InsertRef is the drain reference: rows of seckill_order written by raw
// multi-row INSERT IGNORE statements, one transaction per batch, with the
// store's own schema (indexes included).
type InsertRef struct {
	Name  string
	Rows  int
	Batch int
	Took  time.Duration
}

// Rate is rows per second.
func (r InsertRef) Rate() float64 { return float64(r.Rows) / r.Took.Seconds() }

const orderCols = "(order_no, request_no, activity_id, sku_id, user_id, quantity, unit_price_cents, amount_cents, status, trace_id, created_ms, updated_ms)"

// orderTable is the store's seckill_order (store/schema.go), with
// its unique keys: the reference pays for the same index maintenance.
const orderTableMySQL = `CREATE TABLE seckill_order (
	id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, order_no VARCHAR(80) NOT NULL, request_no VARCHAR(64) NOT NULL,
	activity_id BIGINT NOT NULL, sku_id BIGINT NOT NULL, user_id BIGINT NOT NULL, quantity BIGINT NOT NULL,
	unit_price_cents BIGINT NOT NULL, amount_cents BIGINT NOT NULL, status VARCHAR(32) NOT NULL,
	trace_id VARCHAR(128) NOT NULL DEFAULT '', created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL,
	UNIQUE KEY uk_order_no (order_no), UNIQUE KEY uk_request_no (request_no),
	UNIQUE KEY uk_user_sku (activity_id, sku_id, user_id)) ENGINE=InnoDB`

const orderTableSQLite = `CREATE TABLE seckill_order (
	id INTEGER PRIMARY KEY AUTOINCREMENT, order_no TEXT NOT NULL UNIQUE, request_no TEXT NOT NULL UNIQUE,
	activity_id INTEGER NOT NULL, sku_id INTEGER NOT NULL, user_id INTEGER NOT NULL, quantity INTEGER NOT NULL,
	unit_price_cents INTEGER NOT NULL, amount_cents INTEGER NOT NULL, status TEXT NOT NULL,
	trace_id TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL,
	UNIQUE (activity_id, sku_id, user_id))`

// runInsertRef writes rows in batches of batch through db with verb
// ("INSERT IGNORE" or "INSERT OR IGNORE").
func runInsertRef(name string, db *sql.DB, verb string, rows, batch int) (InsertRef, error) {
	ctx := context.Background()
	var sb strings.Builder
	args := make([]any, 0, 12*batch)
	now := time.Now().UnixMilli()
	start := time.Now()
	for done := 0; done < rows; done += batch {
		sb.Reset()
		args = args[:0]
		sb.WriteString(verb + " INTO seckill_order " + orderCols + " VALUES ")
		for i := 0; i < batch && done+i < rows; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?,?,?,?,?,?,?,?,?,?)")
			n := strconv.Itoa(done + i)
			args = append(args, "o"+n, "r"+n, 2, 2001, done+i+1, 1, 9900, 9900, "CREATED", "r"+n, now, now)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return InsertRef{}, err
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			tx.Rollback()
			return InsertRef{}, err
		}
		if err := tx.Commit(); err != nil {
			return InsertRef{}, err
		}
	}
	return InsertRef{Name: name, Rows: rows, Batch: batch, Took: time.Since(start)}, nil
}

// MySQLInsertRef runs the reference against MariaDB (a database of its own).
func MySQLInsertRef(dsn string, rows, batch int) (InsertRef, error) {
	dsn, err := testenv.MySQLDatabase(dsn, "seckill_drainref")
	if err != nil {
		return InsertRef{}, err
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return InsertRef{}, err
	}
	defer db.Close()
	if _, err := db.Exec(orderTableMySQL); err != nil {
		return InsertRef{}, err
	}
	return runInsertRef("MariaDB", db, "INSERT IGNORE", rows, batch)
}

// SQLiteInsertRef runs the reference against an SQLite file opened the way
// the store opens its own (WAL, busy timeout, immediate transactions).
func SQLiteInsertRef(out string, rows, batch int) (InsertRef, error) {
	path := filepath.Join(out, "drainref.db")
	for _, suffix := range []string{"", "-wal", "-shm"} {
		_ = os.Remove(path + suffix)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return InsertRef{}, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(orderTableSQLite); err != nil {
		return InsertRef{}, err
	}
	return runInsertRef("SQLite", db, "INSERT OR IGNORE", rows, batch)
}
