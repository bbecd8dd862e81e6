package engine

import (
	"errors"
	"fmt"
	"time"

	"seckill/internal/kafkasec"
	"seckill/sale"
	"seckill/stock"
)

// Config is the engine section.
type Config struct {
	// Node distinguishes request numbers of engines that run side by side
	// (0-1023). Default 1.
	Node int64 `yaml:"node"`
	// OccupyTimeout bounds one occupy script call; past it the buyer gets
	// "busy". Default 500ms.
	OccupyTimeout time.Duration `yaml:"occupy_timeout"`
	// ResultTTL is how long ticket results stay readable. Default 48h.
	ResultTTL time.Duration `yaml:"result_ttl"`
	// Listen is the sidecar listener of `seckill engine`
	// ("unix:///run/seckill/engine.sock" or "tcp://127.0.0.1:9090"). A unix
	// socket is created with mode 0600 (only this user connects); tcp://
	// (or a bare host:port) needs TLS (the pair) and a way to know the
	// caller: client certificates under SidecarTLSCA (mutual TLS), or
	// SidecarSecret, which then only ever crosses inside TLS. Validate
	// refuses a tcp listener without TLS, or with TLS but neither.
	Listen string `yaml:"listen"`
	// SidecarSecret is the shared secret of the sidecar: with it the server
	// answers 401 to any call without "Authorization: Bearer <secret>"
	// (compared in constant time), and the edge's client sends it (see
	// edge.engine_secret). At least 32 bytes outside `seckill dev`; set it
	// from the environment, SECKILL_ENGINE_SIDECAR_SECRET. Default none.
	SidecarSecret string `yaml:"sidecar_secret"`
	// SidecarTLSCert and SidecarTLSKey are PEM files: set, the sidecar
	// serves TLS. Default none.
	SidecarTLSCert string `yaml:"sidecar_tls_cert"`
	SidecarTLSKey  string `yaml:"sidecar_tls_key"`
	// SidecarTLSCA is a PEM file of the sidecar's private CA, trusted both
	// ways: the sidecar serving TLS requires every caller to present a
	// certificate it signed (tls.RequireAndVerifyClientCert; the edge's is
	// edge.engine_tls_cert), and the edge's client verifies the sidecar's
	// certificate with it (set, the client speaks TLS). Default none.
	SidecarTLSCA string `yaml:"sidecar_tls_ca"`
	// SidecarReadTimeout bounds reading one request (a half-sent request is
	// cut off after it), SidecarWriteTimeout writing one answer,
	// SidecarIdleTimeout an idle keep-alive connection. Defaults 2s, 5s, 2m.
	SidecarReadTimeout  time.Duration `yaml:"sidecar_read_timeout"`
	SidecarWriteTimeout time.Duration `yaml:"sidecar_write_timeout"`
	SidecarIdleTimeout  time.Duration `yaml:"sidecar_idle_timeout"`
	Kafka               KafkaConfig   `yaml:"kafka"`
	// Batch is group-commit occupy (see batch.go). Default on.
	Batch BatchConfig `yaml:"batch"`
	// Queue is queue mode's waiting line (queueconfig.go). Default off.
	Queue QueueConfig `yaml:"queue"`
	// Window is the user × SKU attempt window the occupy script counts:
	// the edge.rate section's user_sku_limit and user_sku_window, copied
	// here by the app (in-process and `seckill engine` alike read them from
	// the same file). Limit 0 turns it off. Engine.SetWindow changes it on
	// a running engine (SIGHUP).
	Window Window `yaml:"-"`
	// Signing holds the keys the engine signs order messages with: the
	// top-level order_signing section (SECKILL_ORDER_SIGNING_KEYS), which
	// the consumer shares, copied here by the app. At least one key.
	Signing sale.SigningConfig `yaml:"-"`
}

// Window is the user × SKU attempt window: at most Limit purchase attempts
// of one user on one SKU per Period, counted in the occupy script on the
// SKU's shard and shared by every engine — besides the one that took a
// ticket, which the release that gives the ticket back counts. Limit 0
// turns it off.
type Window struct {
	Limit  int
	Period time.Duration
}

// BatchConfig shapes group-commit occupy: concurrent occupies of one SKU
// share one script call. A call goes out at once when none of that SKU is in
// flight; those that arrive meanwhile wait for it and go out together next,
// at most MaxSize per call.
type BatchConfig struct {
	// Enabled turns group commit on. Default true; false runs one occupy
	// script call per buyer.
	Enabled bool `yaml:"enabled"`
	// MaxSize bounds the buyers in one script call (1-1024). Default 256:
	// one call for 256 buyers holds the shard about a millisecond.
	MaxSize int `yaml:"max_size"`
}

// KafkaConfig is the engine's producer.
type KafkaConfig struct {
	Brokers []string `yaml:"brokers"`
	Topic   string   `yaml:"topic"`
	// Acks is "all" (default; the ack DESIGN §6 asks for) or "leader".
	Acks string `yaml:"acks"`
	// SendTimeout bounds the wait for the broker's ack; past it the
	// occupancy is released and the buyer gets "busy". Default 3s.
	SendTimeout time.Duration `yaml:"send_timeout"`
	// FlushFrequency and FlushMessages shape producer batches. Defaults
	// 1ms and 256.
	FlushFrequency time.Duration `yaml:"flush_frequency"`
	FlushMessages  int           `yaml:"flush_messages"`
	// RetryMax is the producer's own retry count. Default 3.
	RetryMax int `yaml:"retry_max"`
	// Security is engine.kafka.tls (enabled, ca_file, cert_file, key_file,
	// server_name) and engine.kafka.sasl (mechanism SCRAM-SHA-256 or
	// SCRAM-SHA-512, user, password — the password from
	// SECKILL_ENGINE_KAFKA_SASL_PASSWORD). Default: plaintext, no SASL.
	kafkasec.Security `yaml:",inline"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Node:          1,
		OccupyTimeout: 500 * time.Millisecond,
		ResultTTL:     48 * time.Hour,

		SidecarReadTimeout:  2 * time.Second,
		SidecarWriteTimeout: 5 * time.Second,
		SidecarIdleTimeout:  2 * time.Minute,
		Batch:               BatchConfig{Enabled: true, MaxSize: 256},
		Queue:               DefaultQueueConfig(),
		Kafka: KafkaConfig{
			Brokers:        []string{"127.0.0.1:9092"},
			Topic:          "seckill.orders",
			Acks:           "all",
			SendTimeout:    3 * time.Second,
			FlushFrequency: time.Millisecond,
			FlushMessages:  256,
			RetryMax:       3,
		},
	}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	switch {
	case c.Node < 0 || c.Node > 1023:
		return errors.New("engine.node must be 0..1023")
	case c.OccupyTimeout <= 0:
		return errors.New("engine.occupy_timeout must be positive")
	case c.ResultTTL < time.Second:
		return errors.New("engine.result_ttl must be at least 1s")
	case len(c.Kafka.Brokers) == 0:
		return errors.New("engine.kafka.brokers must name at least one broker")
	case c.Kafka.Topic == "":
		return errors.New("engine.kafka.topic must not be empty")
	case c.Kafka.Acks != "all" && c.Kafka.Acks != "leader":
		return errors.New("engine.kafka.acks must be all or leader")
	case c.Kafka.SendTimeout <= 0:
		return errors.New("engine.kafka.send_timeout must be positive")
	case c.Kafka.FlushMessages < 0:
		return errors.New("engine.kafka.flush_messages must not be negative")
	case c.Window.Limit < 0:
		return errors.New("edge.rate.user_sku_limit must not be negative (0 disables)")
	case c.Window.Limit > 0 && c.Window.Period < time.Millisecond:
		return errors.New("edge.rate.user_sku_window must be at least 1ms")
	case c.Batch.Enabled && stock.CheckBatchSize(c.Batch.MaxSize) != nil:
		return fmt.Errorf("engine.batch.max_size: %w", stock.CheckBatchSize(c.Batch.MaxSize))
	case c.Kafka.RetryMax < 0:
		return errors.New("engine.kafka.retry_max must not be negative")
	case c.SidecarReadTimeout <= 0 || c.SidecarWriteTimeout <= 0 || c.SidecarIdleTimeout <= 0:
		return errors.New("engine.sidecar_read_timeout, engine.sidecar_write_timeout and engine.sidecar_idle_timeout must be positive")
	case (c.SidecarTLSCert == "") != (c.SidecarTLSKey == ""):
		return errors.New("engine.sidecar_tls_cert and engine.sidecar_tls_key go together")
	}
	if err := c.Queue.Validate(); err != nil {
		return err
	}
	return c.checkListen()
}

// checkListen: a tcp sidecar is reachable by anyone who reaches the port,
// and whoever it serves may occupy for any user, so it must know its
// callers: by a client certificate (mutual TLS) or by the secret — and the
// secret only inside TLS, where no one on the path reads it. A secret in
// the clear, or TLS that lets any client in, is refused.
func (c *Config) checkListen() error {
	if c.Listen == "" {
		return nil
	}
	if network, _ := splitAddr(c.Listen); network == "tcp" {
		switch {
		case c.SidecarTLSCert == "":
			return fmt.Errorf("engine.listen %s is tcp: set engine.sidecar_tls_cert and engine.sidecar_tls_key "+
				"(TLS) with engine.sidecar_tls_ca (client certificates) or engine.sidecar_secret "+
				"(SECKILL_ENGINE_SIDECAR_SECRET, sent only inside TLS), or listen on a unix:// socket", c.Listen)
		case c.SidecarTLSCA == "" && c.SidecarSecret == "":
			return fmt.Errorf("engine.listen %s: TLS without client authentication lets any caller occupy for any user: "+
				"set engine.sidecar_tls_ca (the CA of the callers' certificates) or engine.sidecar_secret", c.Listen)
		}
	}
	return c.Kafka.Security.Validate("engine.kafka")
}
