// Package tlsclient is the one definition of a seckill client's TLS
// settings — for Kafka (internal/kafkasec) and Redis (internal/shard)
// alike: the YAML keys enabled, ca_file, cert_file, key_file and
// server_name, their validation and the crypto/tls configuration they
// build.
package tlsclient

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLS is a client's TLS: off unless Enabled.
type TLS struct {
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of the CAs that sign the servers'
	// certificates; empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate and key (PEM) for
	// servers that ask for one (mutual TLS); both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the servers' certificates must carry; empty:
	// the host of the server address.
	ServerName string `yaml:"server_name"`
}

// Validate names the first bad key under prefix (e.g. "engine.kafka").
func (t TLS) Validate(prefix string) error {
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "") {
		return fmt.Errorf("%s.tls: files or server_name set but tls.enabled is false", prefix)
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return fmt.Errorf("%s.tls.cert_file and %s.tls.key_file go together", prefix, prefix)
	}
	return nil
}

// Config builds the client configuration (TLS 1.2 at least), reading the
// files now so a missing or bad file fails at start; nil when not Enabled.
// what names the client in errors ("kafka", "redis.default").
func (t TLS) Config(what string) (*tls.Config, error) {
	if !t.Enabled {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s tls ca_file: %w", what, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s tls ca_file %s: no PEM certificate in it", what, t.CAFile)
		}
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s tls client certificate: %w", what, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
