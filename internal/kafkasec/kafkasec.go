// Package kafkasec is the one definition of how a seckill Kafka client
// (the engine's producer, the consumer group and its dead-letter producer)
// secures its connections: TLS (server verification, optional client
// certificate) and SASL/SCRAM (SHA-256 or SHA-512). Apply writes them into
// a Sarama config (Net.TLS, Net.SASL).
package kafkasec

import (
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"

	"seckill/internal/tlsclient"
)

// TLS is a client's TLS: off unless Enabled (internal/tlsclient, the
// keys Redis' clients share).
type TLS = tlsclient.TLS

// SASL is a client's SASL authentication: off unless Mechanism is set.
type SASL struct {
	// Mechanism is "" (none), "SCRAM-SHA-256" or "SCRAM-SHA-512".
	Mechanism string `yaml:"mechanism"`
	User      string `yaml:"user"`
	// Password: from the environment like every secret
	// (…_SASL_PASSWORD), not in a committed file.
	Password string `yaml:"password"`
}

// Security is both.
type Security struct {
	TLS  TLS  `yaml:"tls"`
	SASL SASL `yaml:"sasl"`
}

// Validate names the first bad key under prefix (e.g. "engine.kafka").
func (s *Security) Validate(prefix string) error {
	if err := s.TLS.Validate(prefix); err != nil {
		return err
	}
	switch s.SASL.Mechanism {
	case "":
		if s.SASL.User != "" || s.SASL.Password != "" {
			return fmt.Errorf("%s.sasl: user or password set but no sasl.mechanism", prefix)
		}
	case sarama.SASLTypeSCRAMSHA256, sarama.SASLTypeSCRAMSHA512:
		if s.SASL.User == "" || s.SASL.Password == "" {
			return fmt.Errorf("%s.sasl.user and %s.sasl.password must be set for %s", prefix, prefix, s.SASL.Mechanism)
		}
	default:
		return fmt.Errorf("%s.sasl.mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512", prefix)
	}
	return nil
}

// Apply writes s into c: Net.TLS (reading the files now, so a missing or
// bad file fails at start) and Net.SASL with a SCRAM client.
func (s *Security) Apply(c *sarama.Config) error {
	tc, err := s.TLS.Config("kafka")
	if err != nil {
		return err
	}
	if tc != nil {
		c.Net.TLS.Enable = true
		c.Net.TLS.Config = tc
	}
	if s.SASL.Mechanism != "" {
		var gen scram.HashGeneratorFcn
		switch s.SASL.Mechanism {
		case sarama.SASLTypeSCRAMSHA256:
			gen = sha256.New
		case sarama.SASLTypeSCRAMSHA512:
			gen = sha512.New
		default:
			return errors.New("kafka sasl: mechanism must be SCRAM-SHA-256 or SCRAM-SHA-512")
		}
		c.Net.SASL.Enable = true
		c.Net.SASL.Handshake = true
		c.Net.SASL.Mechanism = sarama.SASLMechanism(s.SASL.Mechanism)
		c.Net.SASL.User = s.SASL.User
		c.Net.SASL.Password = s.SASL.Password
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{gen: gen} }
	}
	return nil
}

// scramClient is Sarama's SCRAMClient over xdg-go/scram (the client
// Sarama's own examples use).
type scramClient struct {
	gen  scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (x *scramClient) Begin(user, password, authzID string) error {
	c, err := x.gen.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *scramClient) Step(challenge string) (string, error) { return x.conv.Step(challenge) }

func (x *scramClient) Done() bool { return x.conv.Done() }
