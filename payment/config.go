package payment

import "errors"

// Config is the payment section.
type Config struct {
	// ProviderKey is the HMAC-SHA256 key the payment provider signs its
	// callbacks with (see Sign). Without it every callback is refused (fail
	// closed) and no order can be paid. At least 32 bytes outside `seckill
	// dev`; set it from the environment, SECKILL_PAYMENT_PROVIDER_KEY.
	// Default none.
	ProviderKey string `yaml:"provider_key"`
}

// DefaultConfig has no provider key.
func DefaultConfig() Config { return Config{} }

// Validate names the first bad key.
func (c *Config) Validate() error {
	if c.ProviderKey != "" && len(c.ProviderKey) < 16 {
		return errors.New("payment.provider_key must be at least 16 bytes")
	}
	return nil
}
