package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// syncBuffer is a bytes.Buffer the child's output goroutine and the test
// may use at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSIGHUPReloadsRateLimits runs `seckill dev` as a real process, changes
// edge.rate in its configuration file and sends SIGHUP: the new per-user
// limit applies without a restart; a file with an invalid limit is refused
// and the limits in force stay.
func TestSIGHUPReloadsRateLimits(t *testing.T) {
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	orig, err := os.ReadFile("../../configs/dev.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "dev.yaml")
	writeRate := func(perSecond, burst string) {
		t.Helper()
		s := strings.Replace(string(orig), "    user_per_second: 5 ", "    user_per_second: "+perSecond+" ", 1)
		s = strings.Replace(s, "    user_burst: 10\n", "    user_burst: "+burst+"\n", 1)
		if s == string(orig) && perSecond != "5" {
			t.Fatal("configs/dev.yaml no longer has the user limit lines this test edits")
		}
		if err := os.WriteFile(cfgPath, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRate("5", "10")

	pub, adm := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "dev", "--config", cfgPath, "--data-dir", filepath.Join(dir, "data"), "--listen", pub, "--admin-listen", adm)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		testenv.EventuallyOK(t, what, 60*time.Second, func() error {
			if cond() {
				return nil
			}
			select {
			case err := <-exited:
				exited <- err
				t.Fatalf("seckill dev exited while waiting for %s: %v\n%s", what, err, logs.String())
			default:
			}
			return errors.New("not yet; the logs:\n" + logs.String())
		})
	}
	waitUntil("readiness", func() bool {
		resp, err := http.Get("http://" + pub + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	buy := func(user string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+pub+"/api/v1/flash-sale/order", strings.NewReader(`{"skuId":1001,"quantity":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-User-Id", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	// dev.yaml: 5/s, burst 10 per user: a repeat is a duplicate, not a 429.
	if a, b := buy("501"), buy("501"); a != 200 || b != 409 {
		t.Fatalf("before the reload: %d then %d, want 200 then 409", a, b)
	}

	// One request per 1000 s and user.
	writeRate("0.001", "1")
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil("the reload", func() bool { return strings.Contains(logs.String(), "edge rate limits reloaded") })
	if s := logs.String(); !strings.Contains(s, "edge.rate.user_per_second: 5 → 0.001") || !strings.Contains(s, "edge.rate.user_burst: 10 → 1") {
		t.Fatalf("the reload's log line does not name the changes\n%s", s)
	}
	if a, b := buy("502"), buy("502"); a != 200 || b != 429 {
		t.Fatalf("after the reload: %d then %d, want 200 then 429", a, b)
	}

	// An invalid limit: refused, the process stays up with the limits in
	// force.
	writeRate("0.001", "0")
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil("the refusal", func() bool { return strings.Contains(logs.String(), "reload refused") })
	if s := logs.String(); !strings.Contains(s, "edge.rate.user_burst") {
		t.Fatalf("the refusal does not name the key\n%s", s)
	}
	if a, b := buy("503"), buy("503"); a != 200 || b != 429 {
		t.Fatalf("after a refused reload: %d then %d, want 200 then 429 (the limits in force stay)", a, b)
	}

	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("seckill dev exited with %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("seckill dev did not stop on SIGINT\n%s", logs.String())
	}
}

// TestSIGHUPLeavesTheConsumerRunning: `seckill consumer` has nothing to
// reload; a SIGHUP (say, `pkill -HUP seckill` meant for the edges) is
// logged and the process keeps serving until SIGTERM, which it obeys.
func TestSIGHUPLeavesTheConsumerRunning(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	r := testenv.StartRedis(t)
	k := testenv.StartKafka(t, 1)
	metrics := freeAddr(t)
	cmd := exec.Command(bin, "consumer", "--config", "../../configs/dev.yaml")
	cmd.Env = append(os.Environ(),
		"SECKILL_REDIS_DEFAULT_ADDRS="+r.Addr,
		"SECKILL_CONSUMER_BROKERS="+strings.Join(k.Addrs, ","),
		"SECKILL_STORE_DSN="+filepath.Join(dir, "orders.db"),
		"SECKILL_METRICS_LISTEN="+metrics,
		// A production process refuses dev.yaml's public secrets; the
		// consumer needs none of them.
		"SECKILL_ADMIN_TOKEN=", "SECKILL_TOKEN_KEYS=", "SECKILL_PAYMENT_PROVIDER_KEY=",
		"SECKILL_ORDER_SIGNING_KEYS=k1:reload-test-order-signing-key-0123456789")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // closed when the process has ended, waitErr set
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	serving := func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	// waitUntil polls cond while the process runs, for at most a minute.
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		testenv.EventuallyOK(t, what, 60*time.Second, func() error {
			if cond() {
				return nil
			}
			select {
			case <-exited:
				t.Fatalf("seckill consumer ended while waiting for %s: %v\n%s", what, waitErr, logs.String())
			default:
			}
			return errors.New("not yet; the logs:\n" + logs.String())
		})
	}
	waitUntil("/metrics", serving)
	cmd.Process.Signal(syscall.SIGHUP)
	waitUntil("the SIGHUP's log line (a SIGHUP that stops it fails here)", func() bool {
		return strings.Contains(logs.String(), "nothing to reload")
	})
	if !serving() {
		t.Fatalf("not serving after SIGHUP\n%s", logs.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", waitErr, logs.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatalf("still running 40 s after SIGTERM\n%s", logs.String())
	}
}

// buildSeckill builds this command into dir.
func buildSeckill(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "seckill")
	if err := testenv.BuildSeckill(bin, false); err != nil {
		t.Fatal(err)
	}
	return bin
}
