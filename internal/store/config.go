package store

import "errors"

// Config is the store section.
type Config struct {
	// Driver is "sqlite" (embedded default) or "mysql" (MySQL 8 / MariaDB).
	Driver string `yaml:"driver"`
	// DSN is the data source: a file path for sqlite, a go-sql-driver DSN
	// for mysql ("user:pass@tcp(host:3306)/seckill?parseTime=true").
	DSN string `yaml:"dsn"`
	// MaxOpenConns bounds the connection pool. Default 16.
	MaxOpenConns int `yaml:"max_open_conns"`
}

// DefaultConfig is an SQLite file in the working directory.
func DefaultConfig() Config {
	return Config{Driver: "sqlite", DSN: "seckill.db", MaxOpenConns: 16}
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
	return nil
}
