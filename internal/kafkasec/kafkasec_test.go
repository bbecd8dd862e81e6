package kafkasec

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// writeCA writes a self-signed CA certificate and its key as PEM files.
func writeCA(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// TestApplyBuildsSaramasTLSAndSASL: every setting lands in the Sarama
// config (no live TLS broker needed).
func TestApplyBuildsSaramasTLSAndSASL(t *testing.T) {
	ca, key := writeCA(t)
	s := Security{
		TLS:  TLS{Enabled: true, CAFile: ca, CertFile: ca, KeyFile: key, ServerName: "kafka.internal"},
		SASL: SASL{Mechanism: "SCRAM-SHA-512", User: "seckill", Password: "pw"},
	}
	if err := s.Validate("consumer"); err != nil {
		t.Fatal(err)
	}
	c := sarama.NewConfig()
	if err := s.Apply(c); err != nil {
		t.Fatal(err)
	}
	tc := c.Net.TLS.Config
	if !c.Net.TLS.Enable || tc == nil || tc.ServerName != "kafka.internal" || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Fatalf("tls %v %+v", c.Net.TLS.Enable, tc)
	}
	if !c.Net.SASL.Enable || c.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA512 || c.Net.SASL.User != "seckill" ||
		c.Net.SASL.Password != "pw" || c.Net.SASL.SCRAMClientGeneratorFunc == nil {
		t.Fatalf("sasl %+v", c.Net.SASL)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("sarama refuses the config: %v", err)
	}
	// The SCRAM client starts a conversation (client-first message).
	sc := c.Net.SASL.SCRAMClientGeneratorFunc()
	if err := sc.Begin("seckill", "pw", ""); err != nil {
		t.Fatal(err)
	}
	first, err := sc.Step("")
	if err != nil || !strings.HasPrefix(first, "n,,n=seckill,r=") {
		t.Fatalf("client-first %q %v", first, err)
	}

	// Off by default: nothing set.
	c = sarama.NewConfig()
	if err := (&Security{}).Apply(c); err != nil || c.Net.TLS.Enable || c.Net.SASL.Enable {
		t.Fatalf("default security changed the config: %v", err)
	}
}

func TestValidateNamesTheSetting(t *testing.T) {
	for want, s := range map[string]Security{
		"engine.kafka.sasl.mechanism":                       {SASL: SASL{Mechanism: "PLAIN", User: "u", Password: "p"}},
		"engine.kafka.sasl.user and engine.kafka.sasl.pass": {SASL: SASL{Mechanism: "SCRAM-SHA-256", User: "u"}},
		"engine.kafka.sasl: user or password set":           {SASL: SASL{Password: "p"}},
		"engine.kafka.tls.cert_file":                        {TLS: TLS{Enabled: true, CertFile: "x"}},
		"engine.kafka.tls: files or server_name set":        {TLS: TLS{CAFile: "x"}},
	} {
		if err := s.Validate("engine.kafka"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want %q", s, err, want)
		}
	}
	bad := Security{TLS: TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "missing.pem")}}
	if err := bad.Apply(sarama.NewConfig()); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
}

// TestSCRAMAgainstABroker: a broker that demands SCRAM-SHA-512 (kfake)
// takes a message from a producer built by Apply with the right password
// and refuses one with a wrong password.
func TestSCRAMAgainstABroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser("SCRAM-SHA-512", "seckill", "right-password"), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(password string) error {
		cfg := sarama.NewConfig()
		cfg.Producer.Return.Successes = true
		cfg.Net.DialTimeout = 2 * time.Second
		cfg.Metadata.Retry.Max = 0
		s := Security{SASL: SASL{Mechanism: "SCRAM-SHA-512", User: "seckill", Password: password}}
		if err := s.Apply(cfg); err != nil {
			return err
		}
		p, err := sarama.NewSyncProducer(c.ListenAddrs(), cfg)
		if err != nil {
			return err
		}
		defer p.Close()
		_, _, err = p.SendMessage(&sarama.ProducerMessage{Topic: "t", Value: sarama.StringEncoder("x")})
		return err
	}
	if err := send("right-password"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	if err := send("wrong-password"); err == nil {
		t.Fatal("a wrong password produced")
	}
}
