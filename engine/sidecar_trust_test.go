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
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

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

func TestATCPSidecarMustKnowItsCallers(t *testing.T) {
	const tcp = "tcp://127.0.0.1:9090"
	secret := strings.Repeat("s", 32)
	for _, c := range []struct {
		name   string
		set    func(*Config)
		refuse string // the key the refusal names; "" starts
	}{
		{"tcp:// without a secret or TLS is refused", func(c *Config) { c.Listen = tcp }, "engine.sidecar_tls_cert"},
		{"a bare host:port is tcp and refused", func(c *Config) { c.Listen = "127.0.0.1:9090" }, "engine.sidecar_tls_cert"},
		{"a secret without TLS is refused: it would cross in clear", func(c *Config) {
			c.Listen, c.SidecarSecret = tcp, secret
		}, "engine.sidecar_tls_cert"},
		{"TLS without client authentication is refused", func(c *Config) {
			c.Listen, c.SidecarTLSCert, c.SidecarTLSKey = tcp, "c.pem", "k.pem"
		}, "engine.sidecar_tls_ca"},
		{"mutual TLS starts", func(c *Config) {
			c.Listen, c.SidecarTLSCert, c.SidecarTLSKey, c.SidecarTLSCA = tcp, "c.pem", "k.pem", "ca.pem"
		}, ""},
		{"a secret inside TLS starts", func(c *Config) {
			c.Listen, c.SidecarTLSCert, c.SidecarTLSKey, c.SidecarSecret = tcp, "c.pem", "k.pem", secret
		}, ""},
		{"a cert without its key is refused", func(c *Config) {
			c.Listen, c.SidecarSecret, c.SidecarTLSCert = tcp, secret, "c.pem"
		}, "engine.sidecar_tls_key"},
		{"a unix socket starts", func(c *Config) { c.Listen = "unix:///run/seckill/engine.sock" }, ""},
		{"no listener (an edge's engine) is fine", func(c *Config) {}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			c.set(&cfg)
			err := cfg.Validate()
			if (c.refuse != "") != (err != nil) {
				t.Fatalf("Validate: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), c.refuse) {
				t.Fatalf("the refusal does not name %s: %v", c.refuse, err)
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

func TestASidecarOverTLSWithASecret(t *testing.T) {
	r := newRig(t)
	r.preheat(t, activity(1, 1001, 5, false))
	ca := newTestCA(t, "sidecar-ca")
	certFile, keyFile := ca.issue(t, "engine", x509.ExtKeyUsageServerAuth)
	cfg := DefaultConfig()
	cfg.SidecarTLSCert, cfg.SidecarTLSKey, cfg.SidecarSecret = certFile, keyFile, strings.Repeat("k", 40)
	addr := tcpSidecar(t, r, fixedEngine{}, cfg)
	cc, err := ClientTLS(ca.file, "", "")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := NewClient(addr, ClientConfig{TLS: cc, Secret: cfg.SidecarSecret}).Occupy(context.Background(), r.order(t, 1001, 1))
	if err != nil || tk.RequestNo != "rn-1" {
		t.Fatalf("over TLS: %+v %v", tk, err)
	}
	if _, err := NewClient(addr, ClientConfig{TLS: cc, BreakAfter: 100}).Occupy(context.Background(), r.order(t, 1001, 2)); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "401") {
		t.Fatalf("TLS without the secret: %v, want busy after a 401", err)
	}
	// A plain client gets no answer from a TLS listener.
	if _, err := NewClient(addr, ClientConfig{Timeout: time.Second, Secret: cfg.SidecarSecret}).Occupy(context.Background(), r.order(t, 1001, 2)); err == nil {
		t.Fatal("a plain-text client was served by the TLS sidecar")
	}
}

// Under mutual TLS only a caller whose certificate the sidecar's CA signed
// occupies: no certificate, a certificate of another CA, or a
// self-signed one claiming the edge's name, are refused at the handshake.
func TestAMutualTLSSidecarRefusesCallersWithoutItsCertificate(t *testing.T) {
	r := newRig(t)
	r.preheat(t, activity(1, 1001, 5, false))
	ca, other := newTestCA(t, "sidecar-ca"), newTestCA(t, "other-ca")
	srvCert, srvKey := ca.issue(t, "engine", x509.ExtKeyUsageServerAuth)
	cfg := DefaultConfig()
	cfg.SidecarTLSCert, cfg.SidecarTLSKey, cfg.SidecarTLSCA = srvCert, srvKey, ca.file
	addr := tcpSidecar(t, r, fixedEngine{}, cfg)
	edgeCert, edgeKey := ca.issue(t, "edge", x509.ExtKeyUsageClientAuth)
	foreignCert, foreignKey := other.issue(t, "edge", x509.ExtKeyUsageClientAuth)
	ctx := context.Background()

	good, err := ClientTLS(ca.file, edgeCert, edgeKey)
	if err != nil {
		t.Fatal(err)
	}
	if tk, err := NewClient(addr, ClientConfig{TLS: good}).Occupy(ctx, r.order(t, 1001, 1)); err != nil || tk.RequestNo != "rn-1" {
		t.Fatalf("the edge's certificate: %+v %v", tk, err)
	}
	noCert, err := ClientTLS(ca.file, "", "")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := ClientTLS(ca.file, foreignCert, foreignKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		tls  *tls.Config
	}{{"no client certificate", noCert}, {"a certificate of another CA", foreign}} {
		t.Run(c.name, func(t *testing.T) {
			tk, err := NewClient(addr, ClientConfig{TLS: c.tls, Timeout: 2 * time.Second, BreakAfter: 100}).Occupy(ctx, r.order(t, 1001, 2))
			if err == nil || tk.RequestNo != "" {
				t.Fatalf("occupy: %+v %v, want refused", tk, err)
			}
		})
	}
	// The same by hand, below the client: the handshake (or the first
	// read after it, under TLS 1.3) fails and no HTTP answer comes.
	conn, err := tls.Dial("tcp", strings.TrimPrefix(addr, "tcp://"), &tls.Config{RootCAs: noCert.RootCAs})
	if err == nil {
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: engine\r\n\r\n"))
		b, rerr := io.ReadAll(conn)
		if strings.Contains(string(b), "200") || rerr == nil && len(b) > 0 {
			t.Fatalf("a caller without a certificate read %q (%v)", b, rerr)
		}
	}
	// A sidecar whose CA file is not a CA does not start.
	bad := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bad, []byte("not a pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.SidecarTLSCA = bad
	if _, err := NewServer(fixedEngine{}, r.cat, cfg, zaptest.NewLogger(t)); err == nil || !strings.Contains(err.Error(), "engine.sidecar_tls_ca") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
}

// testCA is a private CA that issues certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM
	dir  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &testCA{cert: cert, key: key, dir: dir, file: filepath.Join(dir, name+".pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

var serial atomic.Int64

// issue writes a certificate for name (and 127.0.0.1) signed by ca, and its key.
func (ca *testCA) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	n := serial.Add(1) + 1
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(ca.dir, fmt.Sprintf("%s-%d.pem", name, n)), filepath.Join(ca.dir, fmt.Sprintf("%s-%d.key", name, n))
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kb)
	return certFile, keyFile
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
