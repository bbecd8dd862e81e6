// Package kafkasec is the one definition of how a seckill Kafka client
// (the engine's producer, the consumer group and its dead-letter producer)
// secures its connections: TLS (server verification, optional client
// certificate) and SASL/SCRAM (SHA-256 or SHA-512). Apply writes them into
// a Sarama config (Net.TLS, Net.SASL).
package kafkasec

import (
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

// TLS is a client's TLS: off unless Enabled.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the brokers'
	// certificates; empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and key (PEM) for
	// brokers that ask for one (mutual TLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the brokers' certificates must carry; empty:
	// the host of the broker address.
	ServerName string `yaml:"server_name"`
}

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
	t := s.TLS
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
		return fmt.Errorf("%s.tls: files or server_name set but tls.enabled is false", prefix)
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("%s.tls.cert_file and %s.tls.key_file go together", prefix, prefix)
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
	if s.TLS.Enabled {
		tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.TLS.ServerName}
		if s.TLS.CAFile != "" {
			pem, err := os.ReadFile(s.TLS.CAFile)
			if err != nil {
				return fmt.Errorf("kafka tls ca_file: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("kafka tls ca_file %s: no PEM certificate in it", s.TLS.CAFile)
			}
		}
		if s.TLS.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(s.TLS.CertFile, s.TLS.KeyFile)
			if err != nil {
				return fmt.Errorf("kafka tls client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
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
