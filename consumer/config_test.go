package consumer

import (
	"testing"

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
