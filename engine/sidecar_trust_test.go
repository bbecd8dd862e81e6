package engine

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// fixedEngine answers every occupy with one ticket, or panics.
type fixedEngine struct{ panics bool }

func (f fixedEngine) Occupy(context.Context, *Request) (Ticket, error) {
	if f.panics {
		panic("engine bug")
	}
	return Ticket{RequestNo: "rn-1", Remaining: 3}, nil
}

func TestATCPSidecarNeedsASecretOrTLS(t *testing.T) {
	for _, c := range []struct {
		name   string
		set    func(*Config)
		refuse bool
	}{
		{"tcp:// without a secret or TLS is refused", func(c *Config) { c.Listen = "tcp://127.0.0.1:9090" }, true},
		{"a bare host:port is tcp and refused", func(c *Config) { c.Listen = "127.0.0.1:9090" }, true},
		{"tcp:// with a secret starts", func(c *Config) {
			c.Listen, c.SidecarSecret = "tcp://127.0.0.1:9090", strings.Repeat("s", 32)
		}, false},
		{"tcp:// with TLS starts", func(c *Config) {
			c.Listen, c.SidecarTLSCert, c.SidecarTLSKey = "tcp://127.0.0.1:9090", "c.pem", "k.pem"
		}, false},
		{"a cert without its key is refused", func(c *Config) {
			c.Listen, c.SidecarSecret, c.SidecarTLSCert = "tcp://127.0.0.1:9090", strings.Repeat("s", 32), "c.pem"
		}, true},
		{"a unix socket starts", func(c *Config) { c.Listen = "unix:///run/seckill/engine.sock" }, false},
		{"no listener (an edge's engine) is fine", func(c *Config) {}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.set(&cfg)
			err := cfg.Validate()
			if c.refuse != (err != nil) {
				t.Fatalf("Validate: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), "engine.sidecar_") {
				t.Fatalf("the refusal names no key: %v", err)
			}
		})
	}
}

func TestTheUnixSocketIsForItsUserOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := Listen("unix://" + path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode().Perm(); m != 0o600 {
		t.Fatalf("socket mode %o, want 600", m)
	}
}

// tcpSidecar serves eng on 127.0.0.1 with cfg's secret, TLS and timeouts.
func tcpSidecar(t *testing.T, r *rig, eng Engine, cfg Config) string {
	t.Helper()
	addr := fmt.Sprintf("tcp://127.0.0.1:%d", testenv.FreePort(t))
	serveSidecarWith(t, eng, r.cat, addr, cfg)
	return addr
}

func TestASidecarWithASecretRefusesCallersWithoutIt(t *testing.T) {
	r := newRig(t)
	r.preheat(t, activity(1, 1001, 5, false))
	secret := strings.Repeat("k", 40)
	cfg := DefaultConfig()
	cfg.SidecarSecret = secret
	addr := tcpSidecar(t, r, fixedEngine{}, cfg)
	ctx := context.Background()
	for _, c := range []struct {
		name, secret string
	}{{"no secret", ""}, {"a wrong secret", strings.Repeat("x", 40)}, {"a prefix of the secret", secret[:39]}} {
		t.Run(c.name, func(t *testing.T) {
			cl := NewClient(addr, ClientConfig{Secret: c.secret, BreakAfter: 100})
			_, err := cl.Occupy(ctx, r.order(t, 1001, 1))
			if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "401") {
				t.Fatalf("occupy: %v, want busy after a 401", err)
			}
		})
	}
	tk, err := NewClient(addr, ClientConfig{Secret: secret}).Occupy(ctx, r.order(t, 1001, 1))
	if err != nil || tk.RequestNo != "rn-1" {
		t.Fatalf("with the secret: %+v %v", tk, err)
	}
}

func TestAHalfSentRequestIsCutOffAfterTheReadTimeout(t *testing.T) {
	r := newRig(t)
	cfg := DefaultConfig()
	cfg.SidecarSecret = strings.Repeat("k", 40)
	cfg.SidecarReadTimeout = 300 * time.Millisecond
	addr := tcpSidecar(t, r, fixedEngine{}, cfg)
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /occupy HTTP/1.1\r\nHost: engine\r\nContent-Length: 20\r\n\r\n1,10")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	// The server answers 408 (or nothing) and closes the connection.
	b, err := io.ReadAll(bufio.NewReader(conn))
	if d := time.Since(start); err != nil || d > 3*time.Second {
		t.Fatalf("the half-sent request held the connection %v (read %q: %v)", d, b, err)
	}
}

func TestAPanicInTheSidecarAnswers500AndItLives(t *testing.T) {
	r := newRig(t)
	r.preheat(t, activity(1, 1001, 5, false))
	addr := "unix://" + t.TempDir() + "/engine.sock"
	serveSidecar(t, fixedEngine{panics: true}, r.cat, addr)
	cl := NewClient(addr, ClientConfig{BreakAfter: 100})
	for i := 0; i < 2; i++ {
		if _, err := cl.Occupy(context.Background(), r.order(t, 1001, 1)); err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("call %d to a panicking engine: %v, want busy after a 500", i, err)
		}
	}
}

func TestASidecarOverTLS(t *testing.T) {
	r := newRig(t)
	r.preheat(t, activity(1, 1001, 5, false))
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	cfg := DefaultConfig()
	cfg.SidecarTLSCert, cfg.SidecarTLSKey = certFile, keyFile
	addr := tcpSidecar(t, r, fixedEngine{}, cfg)
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	tk, err := NewClient(addr, ClientConfig{TLS: &tls.Config{RootCAs: pool}}).Occupy(context.Background(), r.order(t, 1001, 1))
	if err != nil || tk.RequestNo != "rn-1" {
		t.Fatalf("over TLS: %+v %v", tk, err)
	}
	// A plain client gets no answer from a TLS listener.
	if _, err := NewClient(addr, ClientConfig{Timeout: time.Second}).Occupy(context.Background(), r.order(t, 1001, 2)); err == nil {
		t.Fatal("a plain-text client was served by the TLS sidecar")
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "engine"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
