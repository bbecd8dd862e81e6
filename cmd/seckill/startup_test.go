package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/internal/testenv"
	"seckill/internal/token"
)

// The secrets a start-up line must never show.
const (
	dsnPassword   = "Dsn-S3cret-pw"
	redisPassword = "Redis-S3cret-pw"
	adminToken    = "Admin-S3cret-token-0123456789abcdef"
	tokenKey      = "Key-S3cret-0123456789-0123456789ab"
	signingKey    = "Order-S3cret-0123456789-0123456789"
)

// logLine finds the log line whose message is msg in out (JSON lines, or
// console lines "time\tLEVEL\tcaller\tmsg\t{fields}") and answers its
// fields.
func logLine(out, msg string) (map[string]any, bool) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		var f map[string]any
		if strings.HasPrefix(l, "{") {
			if json.Unmarshal([]byte(l), &f) == nil && f["msg"] == msg {
				return f, true
			}
			continue
		}
		parts := strings.Split(l, "\t")
		if len(parts) >= 5 && parts[3] == msg && json.Unmarshal([]byte(parts[len(parts)-1]), &f) == nil {
			return f, true
		}
	}
	return nil, false
}

// checkStartLine checks the fields of a "starting" line against want
// (compared as JSON) and that host is this machine's.
func checkStartLine(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	host, _ := os.Hostname()
	want["host"] = host
	checkFields(t, got, want)
	if _, ok := got["pid"]; !ok {
		t.Errorf("start line without pid: %v", got)
	}
}

// checkFields compares a log line's fields with want, as JSON.
func checkFields(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		wj, _ := json.Marshal(w)
		gj, _ := json.Marshal(got[k])
		if string(wj) != string(gj) {
			t.Errorf("log line %s: %s, want %s", k, gj, wj)
		}
	}
}

// TestStartLinesOfTheProductionProcesses runs `seckill edge`, `engine`,
// `consumer` and `reconcile` with a configuration full of secrets (a MySQL
// DSN with a password, a Redis password, an admin token, a token key, an
// order-signing key) and
// servers that never answer, and a start timeout of 1s; and `seckill
// broker`. Each logs its start line at once — role, listeners, Redis
// shards, brokers, store and DSN, host — and none shows a secret anywhere
// in its output; a process that never got its servers logs no ready line,
// the broker does.
func TestStartLinesOfTheProductionProcesses(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	redisDef, redisHot, kafka, db := freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)
	pub, adm, metrics := freeAddr(t), freeAddr(t), freeAddr(t)
	sock := filepath.Join(dir, "engine.sock")
	cfgPath := filepath.Join(dir, "secrets.yaml")
	dsn := fmt.Sprintf("seckill:%s@tcp(%s)/seckill?parseTime=true", dsnPassword, db)
	yaml := fmt.Sprintf(`log: {format: json, level: info}
start_timeout: 1s
redis:
  default: {addrs: [%s], password: %s}
  hot: {addrs: [%s], password: %s}
engine: {listen: "unix://%s", kafka: {brokers: [%s]}}
consumer: {brokers: [%s]}
store: {driver: mysql, dsn: "%s"}
admin: {listen: %s, token: %s}
token: {keys: [{id: k1, secret: %s}]}
order_signing: {keys: [{id: o1, secret: %s}]}
edge: {listen: %s, identity: any, identity_insecure: true}
metrics: {listen: %s}
`, redisDef, redisPassword, redisHot, redisPassword, sock, kafka, kafka, dsn, adm, adminToken, tokenKey, signingKey, pub, metrics)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	redis := map[string]any{"default": []string{redisDef}, "hot0": []string{redisHot}}
	shown := "seckill:xxxxx@tcp(" + db + ")/seckill?parseTime=true"
	for _, tc := range []struct {
		role string
		want map[string]any
	}{
		{"edge", map[string]any{"listeners": map[string]string{"public": pub, "admin": adm}, "redis": redis,
			"brokers": []string{kafka}, "store": "mysql", "dsn": shown}},
		{"engine", map[string]any{"listeners": map[string]string{"sidecar": "unix://" + sock, "metrics": metrics}, "redis": redis,
			"brokers": []string{kafka}, "store": "mysql", "dsn": shown}},
		{"consumer", map[string]any{"listeners": map[string]string{"metrics": metrics}, "redis": redis,
			"brokers": []string{kafka}, "store": "mysql", "dsn": shown}},
		{"reconcile", map[string]any{"listeners": nil, "redis": redis, "brokers": []string{kafka}, "store": "mysql", "dsn": shown}},
	} {
		t.Run(tc.role, func(t *testing.T) {
			cmd := exec.Command(bin, tc.role, "--config", cfgPath)
			cmd.Env = testenv.CleanEnv()
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("still running 30 s after a 1 s start timeout\n%s", out)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "start_timeout (1s) passed") {
				t.Fatalf("exit %v, want 1 after the start timeout\n%s", err, out)
			}
			line, ok := logLine(string(out), "starting")
			if !ok {
				t.Fatalf("no start line\n%s", out)
			}
			tc.want["role"] = tc.role
			checkStartLine(t, line, tc.want)
			for _, secret := range []string{dsnPassword, redisPassword, adminToken, tokenKey, signingKey} {
				if strings.Contains(string(out), secret) {
					t.Errorf("the output shows the secret %q\n%s", secret, out)
				}
			}
			if _, ok := logLine(string(out), "ready"); ok {
				t.Errorf("a ready line from a process that never got its servers\n%s", out)
			}
		})
	}

	t.Run("broker", func(t *testing.T) {
		addr := freeAddr(t)
		cmd := exec.Command(bin, "broker", "--listen", addr, "--partitions", "2")
		var logs syncBuffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		defer func() {
			cmd.Process.Kill()
			<-exited
		}()
		var ready map[string]any
		testenv.EventuallyOK(t, "the broker's ready line", 30*time.Second, func() error {
			var ok bool
			if ready, ok = logLine(logs.String(), "ready"); !ok {
				return errors.New("no ready line\n" + logs.String())
			}
			return nil
		})
		line, _ := logLine(logs.String(), "starting")
		checkStartLine(t, line, map[string]any{"role": "broker", "listeners": map[string]string{"kafka": addr}})
		checkFields(t, ready, map[string]any{"role": "broker", "listeners": []string{addr}, "partitions": 2})
		cmd.Process.Signal(syscall.SIGINT)
		if err := <-exited; err != nil {
			t.Errorf("broker after SIGINT: %v\n%s", err, logs.String())
		}
		exited <- nil
	})
}

// TestStartLineFields builds the start line of every role of a process
// from one configuration and checks what each names and that no secret is
// among the fields.
func TestStartLineFields(t *testing.T) {
	cfg := config.Default()
	cfg.Redis.Default.Addrs, cfg.Redis.Default.Password = []string{"10.0.0.1:6379"}, redisPassword
	cfg.Redis.Hot = nil // the hot SKUs share the default Redis
	cfg.Engine.Kafka.Brokers = []string{"k2:9092", "k1:9092"}
	cfg.Consumer.Brokers = []string{"k1:9092", "k3:9092"}
	cfg.Store.Driver, cfg.Store.DSN = "mysql", "u:"+dsnPassword+"@tcp(db:3306)/seckill"
	cfg.Admin.Token = adminToken
	cfg.Token.Keys = []token.Key{{ID: "k1", Secret: tokenKey}}
	for _, tc := range []struct {
		name    string
		roles   app.Roles
		sidecar string
		brokers []string
		store   bool
		engine  string
	}{
		{"edge with the engine in-process", app.Roles{Edge: true, Engine: true}, "", []string{"k1:9092", "k2:9092", "k3:9092"}, true, ""},
		{"edge calling a sidecar", app.Roles{Edge: true}, "unix:///run/e.sock", []string{"k1:9092", "k3:9092"}, true, "unix:///run/e.sock"},
		{"engine sidecar", app.Roles{Engine: true}, "", []string{"k1:9092", "k2:9092"}, true, ""},
		{"consumer", app.Roles{Consumer: true}, "", []string{"k1:9092", "k3:9092"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			c.Edge.Engine = tc.sidecar
			core, logs := observer.New(zapcore.InfoLevel)
			up := announce(zap.New(core), partsLine("r", c, tc.roles, named("public", "1.2.3.4:80", "metrics", "")))
			up.ready()
			all := logs.AllUntimed()
			if len(all) != 2 || all[0].Message != "starting" || all[1].Message != "ready" {
				t.Fatalf("lines: %+v", all)
			}
			f := all[0].ContextMap()
			b, _ := json.Marshal(f)
			for _, secret := range []string{dsnPassword, redisPassword, adminToken, tokenKey, signingKey} {
				if strings.Contains(string(b), secret) {
					t.Errorf("the start line shows %q: %s", secret, b)
				}
			}
			if fmt.Sprint(f["brokers"]) != fmt.Sprint(tc.brokers) {
				t.Errorf("brokers %v, want %v", f["brokers"], tc.brokers)
			}
			if got := fmt.Sprint(f["redis"]); got != "map[default:[10.0.0.1:6379] hot:[10.0.0.1:6379]]" {
				t.Errorf("redis %s", got)
			}
			if got := fmt.Sprint(f["listeners"]); got != "map[public:1.2.3.4:80]" {
				t.Errorf("listeners %s (an empty address is left out)", got)
			}
			if f["dsn"] != "u:xxxxx@tcp(db:3306)/seckill" || f["store"] != "mysql" || f["role"] != "r" {
				t.Errorf("store, dsn, role: %v %v %v", f["store"], f["dsn"], f["role"])
			}
			if e, _ := f["engine"].(string); e != tc.engine {
				t.Errorf("engine %q, want %q", e, tc.engine)
			}
			if r := all[1].ContextMap(); r["role"] != "r" || r["took"] == nil {
				t.Errorf("ready line: %v", r)
			}
		})
	}
}

// TestRedactDSN: a DSN's password never reaches a log, whatever it holds.
func TestRedactDSN(t *testing.T) {
	for _, tc := range []struct{ driver, dsn, want string }{
		{"mysql", "seckill:" + dsnPassword + "@tcp(db:3306)/seckill?parseTime=true", "seckill:xxxxx@tcp(db:3306)/seckill?parseTime=true"},
		{"mysql", "seckill:p@ss:w/rd)(@tcp(db:3306)/seckill", "seckill:xxxxx@tcp(db:3306)/seckill"},
		{"mysql", "seckill@tcp(db:3306)/seckill", "seckill@tcp(db:3306)/seckill"},
		{"mysql", "not a dsn " + dsnPassword, "(not shown: does not parse)"},
		{"sqlite", "/var/lib/seckill/orders.db", "/var/lib/seckill/orders.db"},
		{"sqlite", "file:orders.db?_pragma=busy_timeout(5000)", "file:orders.db"},
	} {
		if got := redactDSN(tc.driver, tc.dsn); got != tc.want {
			t.Errorf("redactDSN(%s, %q) = %q, want %q", tc.driver, tc.dsn, got, tc.want)
		}
	}
}
