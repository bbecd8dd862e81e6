package edge

import (
	"errors"
	"time"
)

// Config is the edge section.
type Config struct {
	// Listen is the public listener. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// Engine is the sidecar engine address ("unix:///path.sock",
	// "tcp://host:port"); empty runs the engine in-process.
	Engine string `yaml:"engine"`
	// MaxBodyBytes refuses larger request bodies before parsing. Default 4096.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// ReadTimeout, WriteTimeout, IdleTimeout close slow or idle clients.
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	// SoldOutTTL is how long a local sold-out flag lives without being
	// refreshed (the fallback when an event is missed). Default 2s.
	SoldOutTTL time.Duration `yaml:"soldout_ttl"`
	// RefreshInterval reloads the activity catalog. Default 2s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		MaxBodyBytes:    4096,
		ReadTimeout:     5 * time.Second,
		WriteTimeout:    5 * time.Second,
		IdleTimeout:     60 * time.Second,
		SoldOutTTL:      2 * time.Second,
		RefreshInterval: 2 * time.Second,
	}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("edge.listen must not be empty")
	case c.MaxBodyBytes < 64:
		return errors.New("edge.max_body_bytes must be at least 64")
	case c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return errors.New("edge.read_timeout, edge.write_timeout and edge.idle_timeout must be positive")
	case c.SoldOutTTL <= 0:
		return errors.New("edge.soldout_ttl must be positive")
	case c.RefreshInterval <= 0:
		return errors.New("edge.refresh_interval must be positive")
	}
	return nil
}
