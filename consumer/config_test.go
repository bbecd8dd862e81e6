package consumer

import (
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

// TestGroupAndDLQConfigsCarryKafkaSecurity: consumer.tls and consumer.sasl
// reach both the group's and the dead-letter producer's Sarama configs.
func TestGroupAndDLQConfigsCarryKafkaSecurity(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SASL.Mechanism, cfg.SASL.User, cfg.SASL.Password = "SCRAM-SHA-512", "consumer", "pw"
	cfg.TLS.Enabled = true
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := groupConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dlqConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*sarama.Config{"group": g, "dlq": d} {
		if !c.Net.TLS.Enable || !c.Net.SASL.Enable || c.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA512 ||
			c.Net.SASL.User != "consumer" || c.Net.SASL.Password != "pw" || c.Net.SASL.SCRAMClientGeneratorFunc == nil {
			t.Errorf("%s config: tls %v sasl %+v", name, c.Net.TLS.Enable, c.Net.SASL)
		}
	}
}

func TestBacklogKeysValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" valid
	}{
		{"the defaults are valid", func(*Config) {}, ""},
		{"lag_high 0 turns it off whatever lag_low says", func(c *Config) { c.LagHigh, c.LagLow, c.LagInterval = 0, time.Hour, 0 }, ""},
		{"a negative lag_high is refused", func(c *Config) { c.LagHigh = -time.Second }, "consumer.lag_high"},
		{"lag_low at lag_high is refused", func(c *Config) { c.LagLow = c.LagHigh }, "consumer.lag_low"},
		{"a negative lag_low is refused", func(c *Config) { c.LagLow = -time.Second }, "consumer.lag_low"},
		{"lag_interval 0 is refused while on", func(c *Config) { c.LagInterval = 0 }, "consumer.lag_interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
