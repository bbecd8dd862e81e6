package store

import (
	"errors"
	"time"
)

// Config is the store section.
type Config struct {
	// Driver is "sqlite" (embedded default) or "mysql" (MySQL 8 / MariaDB).
	Driver string `yaml:"driver"`
	// DSN is the data source: a file path (or "file:" URI) for sqlite, a
	// go-sql-driver DSN for mysql ("user:pass@tcp(host:3306)/seckill").
	// For sqlite, WAL, busy_timeout and immediate transactions are added.
	DSN string `yaml:"dsn"`
	// MaxOpenConns bounds the connection pool (for sqlite: the readers;
	// writes go through one connection). Default 16.
	MaxOpenConns int `yaml:"max_open_conns"`
	// BusyTimeout is how long sqlite waits for another process's write
	// lock, and the bound on schema migration. Default 5s.
	BusyTimeout time.Duration `yaml:"busy_timeout"`
}

// DefaultConfig is an SQLite file in the working directory.
func DefaultConfig() Config {
	return Config{Driver: "sqlite", DSN: "seckill.db", MaxOpenConns: 16, BusyTimeout: 5 * time.Second}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	if c.Driver != "sqlite" && c.Driver != "mysql" {
		return errors.New("store.driver must be sqlite or mysql")
	}
	if c.DSN == "" {
		return errors.New("store.dsn must not be empty")
	}
	if c.MaxOpenConns <= 0 {
		return errors.New("store.max_open_conns must be positive")
	}
	if c.BusyTimeout < 0 {
		return errors.New("store.busy_timeout must not be negative")
	}
	return nil
}

func (c *Config) busyTimeout() time.Duration {
	if c.BusyTimeout <= 0 {
		return 5 * time.Second
	}
	return c.BusyTimeout
}

func (c *Config) migrateTimeout() time.Duration { return 6 * c.busyTimeout() }
