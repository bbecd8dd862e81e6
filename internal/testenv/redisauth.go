package testenv

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// RedisTLS is a test redis-server's TLS: a CA made for the server, the
// server's certificate (for 127.0.0.1 and localhost) and a client
// certificate, all PEM files in the server's directory, made with openssl
// when the server starts.
type RedisTLS struct {
	// ClientAuth makes the server require a client certificate the CA
	// signed (tls-auth-clients yes); otherwise it asks for none.
	ClientAuth bool
	CAFile     string // the CA's certificate: what a client verifies the server with
	CertFile   string // the client's certificate and key
	KeyFile    string
	serverCert string
	serverKey  string
}

// ACLAdmin is the user (with the password ACLAdminPassword) that
// WithRedisACL adds for the test's own inspection: every command, key and
// channel. Client and Do authenticate as it.
const (
	ACLAdmin         = "testenv"
	ACLAdminPassword = "testenv-admin-password-0123456789"
)

// WithRedisPassword starts the server with requirepass: every client
// must AUTH with password (Client and Do do).
func WithRedisPassword(password string) RedisOption {
	return func(r *Redis) {
		r.Username, r.Password = "", password
		r.Args = append(r.Args, "--requirepass", password)
	}
}

// WithRedisACL starts the server with an ACL file holding rules (one ACL
// user per line, in the aclfile syntax: "user edge on >secret ~sk:* +get"),
// plus ACLAdmin for the test itself; the default user is off unless rules
// define it.
func WithRedisACL(rules ...string) RedisOption {
	return func(r *Redis) {
		lines := []string{"user " + ACLAdmin + " on >" + ACLAdminPassword + " ~* &* +@all"}
		def := false
		for _, l := range rules {
			def = def || strings.HasPrefix(strings.TrimSpace(l), "user default ")
		}
		if !def {
			lines = append(lines, "user default off")
		}
		r.aclFile = strings.Join(append(lines, rules...), "\n") + "\n"
		r.Username, r.Password = ACLAdmin, ACLAdminPassword
	}
}

// WithRedisTLS starts the server speaking TLS only on its port, with
// certificates made for it; clientAuth requires a client certificate.
func WithRedisTLS(clientAuth bool) RedisOption {
	return func(r *Redis) { r.TLS = &RedisTLS{ClientAuth: clientAuth} }
}

// prepare writes what the options need before the first start: the ACL
// file, the TLS certificates.
func (r *Redis) prepare() error {
	if r.aclFile != "" {
		if err := os.WriteFile(filepath.Join(r.Dir, "users.acl"), []byte(r.aclFile), 0o600); err != nil {
			return err
		}
	}
	if r.TLS != nil && r.TLS.CAFile == "" {
		if err := r.TLS.make(r.Dir); err != nil {
			return fmt.Errorf("redis TLS certificates: %w", err)
		}
	}
	return nil
}

// authArgs are the server arguments of the ACL file and TLS.
func (r *Redis) authArgs() []string {
	var args []string
	if r.aclFile != "" {
		args = append(args, "--aclfile", filepath.Join(r.Dir, "users.acl"))
	}
	if r.TLS != nil {
		auth := "no"
		if r.TLS.ClientAuth {
			auth = "yes"
		}
		args = append(args, "--port", "0", "--tls-port", itoa(r.Port), "--tls-cert-file", r.TLS.serverCert,
			"--tls-key-file", r.TLS.serverKey, "--tls-ca-cert-file", r.TLS.CAFile, "--tls-auth-clients", auth)
	}
	return args
}

// Config is the client side: the CA as the only root, and the client
// certificate.
func (x *RedisTLS) Config() (*tls.Config, error) {
	pem, err := os.ReadFile(x.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", x.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(x.CertFile, x.KeyFile)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// make writes a CA, a server and a client certificate into dir with
// openssl.
func (x *RedisTLS) make(dir string) error {
	if _, err := exec.LookPath("openssl"); err != nil {
		return fmt.Errorf("openssl is required by the Redis TLS tests (apt-get install -y openssl): %w", err)
	}
	p := func(n string) string { return filepath.Join(dir, n) }
	x.CAFile, x.serverCert, x.serverKey, x.CertFile, x.KeyFile = p("ca.pem"), p("server.pem"), p("server-key.pem"), p("client.pem"), p("client-key.pem")
	ext := p("server.ext")
	if err := os.WriteFile(ext, []byte("subjectAltName=IP:127.0.0.1,DNS:localhost\n"), 0o600); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=seckill test CA", "-keyout", p("ca-key.pem"), "-out", x.CAFile},
		{"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=localhost", "-keyout", x.serverKey, "-out", p("server.csr")},
		{"x509", "-req", "-in", p("server.csr"), "-CA", x.CAFile, "-CAkey", p("ca-key.pem"), "-CAcreateserial", "-days", "2", "-extfile", ext, "-out", x.serverCert},
		{"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=seckill test client", "-keyout", x.KeyFile, "-out", p("client.csr")},
		{"x509", "-req", "-in", p("client.csr"), "-CA", x.CAFile, "-CAkey", p("ca-key.pem"), "-CAcreateserial", "-days", "2", "-out", x.CertFile},
	} {
		if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// dial connects to r.Addr, over TLS where the server speaks it.
func (r *Redis) dial(timeout time.Duration) (net.Conn, error) {
	if r.TLS == nil {
		return net.DialTimeout("tcp", r.Addr, timeout)
	}
	tc, err := r.TLS.Config()
	if err != nil {
		return nil, err
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", r.Addr, tc)
}

// auth sends AUTH on c when r has credentials.
func (r *Redis) auth(c net.Conn, br *bufio.Reader) error {
	if r.Password == "" {
		return nil
	}
	args := []string{"AUTH", r.Password}
	if r.Username != "" {
		args = []string{"AUTH", r.Username, r.Password}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return err
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+OK") {
		return fmt.Errorf("AUTH: %q", strings.TrimSpace(line))
	}
	return nil
}

// ClientOption is a rueidis option for the server as the test's own
// client: r's credentials and TLS.
func (r *Redis) ClientOption() rueidis.ClientOption {
	o := rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true, Username: r.Username, Password: r.Password}
	if r.TLS != nil {
		tc, err := r.TLS.Config()
		if err != nil {
			panic(fmt.Sprintf("testenv: redis TLS config: %v", err))
		}
		o.TLSConfig = tc
	}
	return o
}
