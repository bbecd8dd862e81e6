package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// devProc is a `seckill dev` child process (its output in a log file of
// the test's), killed when the test ends.
type devProc struct{ *testenv.Proc }

func startDev(t *testing.T, bin, dataDir, pub, adm string, env ...string) *devProc {
	t.Helper()
	p := &devProc{&testenv.Proc{Name: "seckill dev", Bin: bin, Log: filepath.Join(t.TempDir(), "dev.log"),
		Args: []string{"dev", "--config", "../../configs/dev.yaml", "--data-dir", dataDir, "--listen", pub, "--admin-listen", adm},
		Env:  append(os.Environ(), env...)}}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, time.Minute) })
	return p
}

type httpAnswer struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func call(method, url, body string) (httpAnswer, error) { return callAs(4711, method, url, body) }

// callAs sends a request as buyer user and reads the answer.
func callAs(user int, method, url, body string) (httpAnswer, error) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-Id", strconv.Itoa(user))
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := httpAnswer{Status: resp.StatusCode}
	_ = json.Unmarshal(b, &a)
	return a, nil
}

// TestDevWaitsForItsLoadingRedis is the failure: `seckill dev`
// restarted on a data directory whose append-only file takes seconds to
// load died at once with "redis.default: LOADING Redis is loading the
// dataset in memory". Now it waits: /healthz answers, /readyz and the buyer
// API answer 503 naming redis.default, one log line says what it waits for
// (not one per retry), and once Redis has loaded it serves the sale. With a
// start timeout shorter than the load it exits naming the dependency.
//
// The data directory's default Redis gets a dataset of filler keys and
// loads it slowly on purpose (dev.redis_args: key-load-delay), for five
// seconds or so.
func TestDevWaitsForItsLoadingRedis(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	data := filepath.Join(dir, "data")
	// The default Redis' files, where dev keeps them (data/redis), written
	// by a redis-server of our own with dev's persistence.
	r := &testenv.Redis{Dir: filepath.Join(data, "redis"), Port: testenv.FreePort(t), Args: []string{"--appendonly", "yes"}}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	r.Fill(t, 30000, 64)
	keys, err := r.Persist()
	if err != nil {
		t.Fatal(err)
	}
	r.Shutdown()
	slow := "SECKILL_DEV_REDIS_ARGS=" + strings.Join(testenv.SlowLoadArgs(5*time.Second, keys), ",")

	t.Run("a start timeout shorter than the load ends the process naming redis.default", func(t *testing.T) {
		p := startDev(t, bin, data, freeAddr(t), freeAddr(t), slow, "SECKILL_START_TIMEOUT=1s")
		select {
		case <-p.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("still running 30s after a 1s start timeout\n%s", p.SinceStart())
		}
		var exit *exec.ExitError
		if !errors.As(p.Err(), &exit) || exit.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1\n%s", p.Err(), p.SinceStart())
		}
		out := p.SinceStart()
		for _, want := range []string{"seckill dev: start_timeout (1s) passed while waiting for redis.default", "LOADING"} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
		}
	})

	t.Run("it waits, answering probes and buyers, then sells", func(t *testing.T) {
		pub, adm := freeAddr(t), freeAddr(t)
		p := startDev(t, bin, data, pub, adm, slow)
		started := time.Now()
		var sawWaiting bool
		for {
			select {
			case <-p.Exited():
				t.Fatalf("seckill dev exited: %v\n%s", p.Err(), p.SinceStart())
			default:
			}
			if time.Since(started) > 90*time.Second {
				t.Fatalf("not ready after 90s\n%s", p.SinceStart())
			}
			ready, err := call("GET", "http://"+pub+"/readyz", "")
			if err != nil { // the listener is not open yet
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if ready.Status == 200 {
				break
			}
			if ready.Status != 503 || ready.Code != "NOT_READY" {
				t.Fatalf("/readyz while starting: %+v", ready)
			}
			if strings.Contains(ready.Message, "redis.default") {
				sawWaiting = true
				if h, err := call("GET", "http://"+pub+"/healthz", ""); err != nil || h.Status != 200 {
					t.Errorf("/healthz while waiting for Redis: %+v %v", h, err)
				}
				if b, err := call("POST", "http://"+pub+"/api/v1/flash-sale/order", `{"skuId":1001,"quantity":1}`); err != nil || b.Status != 503 || b.Code != "BUSY" {
					t.Errorf("a purchase while waiting for Redis: %+v %v, want 503 BUSY", b, err)
				}
				if a, err := call("GET", "http://"+adm+"/admin/v1/activities", ""); err != nil || a.Status != 503 {
					t.Errorf("the admin API while waiting for Redis: %+v %v, want 503", a, err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		waited := time.Since(started)
		if !sawWaiting {
			t.Fatalf("ready after %v without ever waiting for redis.default: the load was too short for the test\n%s", waited, p.SinceStart())
		}
		if b, err := call("POST", "http://"+pub+"/api/v1/flash-sale/order", `{"skuId":1001,"quantity":1}`); err != nil || b.Status != 200 || b.Code != "QUEUING" {
			t.Fatalf("a purchase once ready: %+v %v\n%s", b, err, p.SinceStart())
		}
		out := p.SinceStart()
		first := strings.Count(out, "\twaiting for a dependency\t{\"dependency\": \"redis.default\"")
		still := strings.Count(out, "still waiting for a dependency\t{\"dependency\": \"redis.default\"")
		done := strings.Count(out, "dependency ready\t{\"dependency\": \"redis.default\"")
		t.Logf("ready after %v: %d first line, %d still-waiting lines, %d ready line for redis.default", waited.Round(time.Millisecond), first, still, done)
		if first != 1 || done != 1 || still > int(waited/(5*time.Second))+1 {
			t.Errorf("log lines for redis.default: %d first, %d still, %d ready over %v; want 1, at most one per 5s, 1\n%s", first, still, done, waited, out)
		}
		if !strings.Contains(out, "LOADING") {
			t.Errorf("the wait's log line does not give Redis' answer (LOADING)\n%s", out)
		}
		// The start line comes before the wait, the ready line after it.
		testenv.Eventually(t, "dev's ready line", 10*time.Second, func() bool {
			out = p.SinceStart()
			return strings.Contains(out, "\tready\t{\"role\": \"dev\"")
		})
		starting := strings.Index(out, "\tstarting\t{\"role\": \"dev\"")
		waitEnded := strings.Index(out, "dependency ready\t{\"dependency\": \"redis.default\"")
		readyAt := strings.Index(out, "\tready\t{\"role\": \"dev\"")
		if starting < 0 || waitEnded < starting || readyAt < waitEnded || strings.Count(out, "\tready\t{") != 1 {
			t.Errorf("want one start line, then the wait, then one ready line (at %d, %d, %d)\n%s", starting, waitEnded, readyAt, out)
		}
	})
}
