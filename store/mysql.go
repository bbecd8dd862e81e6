package store

import (
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// openMySQL connects to MySQL 8 / MariaDB. Reads and writes share one pool.
func openMySQL(cfg Config) (*sqlStore, error) {
	mc, err := mysql.ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	// Affected rows must count changed rows (the driver's default), which
	// the insert and guard checks rely on.
	mc.ClientFoundRows = false
	if mc.Timeout == 0 {
		mc.Timeout = 5 * time.Second
	}
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("store.dsn: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	return &sqlStore{d: &mysqlDialect, w: db, r: db}, nil
}
