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
	// MaxBodyBytes refuses larger request bodies before parsing (413); it
	// is also the server's MaxRequestBodySize. Default 4096.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// ReadBufferSize is the per-connection read buffer, which also caps the
	// request line plus headers (larger ones get 431). Default 4096.
	ReadBufferSize int `yaml:"read_buffer_size"`
	// MaxConns caps concurrent connections; 0 keeps fasthttp's default
	// (256Ki).
	MaxConns int `yaml:"max_conns"`
	// ReadTimeout, WriteTimeout, IdleTimeout close slow or idle clients.
	// Defaults 5s, 5s, 60s.
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	// SoldOutTTL is how long a local sold-out flag lives without being
	// refreshed (the fallback when an event is missed). Default 2s.
	SoldOutTTL time.Duration `yaml:"soldout_ttl"`
	// RefreshInterval reloads the activity catalog. Default 2s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// ViewTTL bounds how long a cached per-SKU activity view is reused
	// before it is rebuilt from the catalog (views are also rebuilt at
	// every window boundary and catalog reload). Default 1s.
	ViewTTL time.Duration `yaml:"view_ttl"`
	// ClockSyncInterval re-samples the offset between the local clock and
	// Redis TIME, the clock the occupy script judges windows by. Default 5s.
	ClockSyncInterval time.Duration `yaml:"clock_sync_interval"`
	// RedisTimeout bounds the edge's own Redis calls: result reads,
	// readiness pings, TIME samples, catalog loads. Default 500ms.
	RedisTimeout time.Duration `yaml:"redis_timeout"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		MaxBodyBytes:      4096,
		ReadBufferSize:    4096,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       60 * time.Second,
		SoldOutTTL:        2 * time.Second,
		RefreshInterval:   2 * time.Second,
		ViewTTL:           time.Second,
		ClockSyncInterval: 5 * time.Second,
		RedisTimeout:      500 * time.Millisecond,
	}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	switch {
	case c.Listen == "":
		return errors.New("edge.listen must not be empty")
	case c.MaxBodyBytes < 64:
		return errors.New("edge.max_body_bytes must be at least 64")
	case c.ReadBufferSize < 1024:
		return errors.New("edge.read_buffer_size must be at least 1024")
	case c.MaxConns < 0:
		return errors.New("edge.max_conns must not be negative")
	case c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return errors.New("edge.read_timeout, edge.write_timeout and edge.idle_timeout must be positive")
	case c.SoldOutTTL <= 0:
		return errors.New("edge.soldout_ttl must be positive")
	case c.RefreshInterval <= 0:
		return errors.New("edge.refresh_interval must be positive")
	case c.ViewTTL <= 0:
		return errors.New("edge.view_ttl must be positive")
	case c.ClockSyncInterval <= 0:
		return errors.New("edge.clock_sync_interval must be positive")
	case c.RedisTimeout <= 0:
		return errors.New("edge.redis_timeout must be positive")
	}
	return nil
}
