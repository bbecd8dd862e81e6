package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // registers driver "sqlite"
)

// openSQLite opens the database file twice: one connection for every write
// (SQLite allows one writer; queueing in database/sql beats SQLITE_BUSY) and
// a pool of readers, which WAL lets run beside the writer.
func openSQLite(cfg Config) (*sqlStore, error) {
	dsn := cfg.DSN
	if !strings.HasPrefix(dsn, "file:") {
		dsn = "file:" + dsn
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	ms := strconv.FormatInt(cfg.busyTimeout().Milliseconds(), 10)
	dsn += sep + "_pragma=busy_timeout(" + ms + ")&_pragma=journal_mode(WAL)&_txlock=immediate"
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", dsn+"&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	r.SetMaxOpenConns(cfg.MaxOpenConns)
	r.SetMaxIdleConns(cfg.MaxOpenConns)
	return &sqlStore{d: &sqliteDialect, w: w, r: r}, nil
}
