package engine

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS is the edge's side of a TLS sidecar: the sidecar's certificate
// verified against caFile (engine.sidecar_tls_ca) and, when certFile and
// keyFile are set (edge.engine_tls_cert and _key), the edge's own
// certificate, which a sidecar that requires client certificates checks
// against the same CA. An empty caFile is no TLS (nil).
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, nil
	}
	pool, err := loadCA(caFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("edge.engine_tls_cert and edge.engine_tls_key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// loadCA reads engine.sidecar_tls_ca.
func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("engine.sidecar_tls_ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("engine.sidecar_tls_ca %s holds no PEM certificate", file)
	}
	return pool, nil
}
