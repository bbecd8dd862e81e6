package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

// TestDevWithoutConfigRunsTheDevDefaults runs `seckill dev` with no
// --config and no SECKILL_* variable but the two latency budgets: it must
// run configs/dev.yaml (as `make run` does), not the production limits. A
// crowd of 3,000 distinct buyers from 127.0.0.1 buys the demo SKU's 1,000
// units (under the production per-address limit it got 44), the orders
// land, the dev admin token works, and a reserved buyer of a requireToken
// sale gets a token and buys with it (without token keys: 503).
func TestDevWithoutConfigRunsTheDevDefaults(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	pub, adm := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "dev", "--data-dir", filepath.Join(dir, "data"), "--listen", pub, "--admin-listen", adm)
	cmd.Dir = dir // no configs/ beside it: the defaults come from the binary
	// The budgets past which a slow Redis call answers 503 (500ms by
	// default) are raised as in cmd/seckill/app's crowdBudgets: on a loaded
	// two-core machine a round trip now and then takes longer, and a buyer
	// answered 503 holds no ticket. Nothing checked here depends on them.
	cmd.Env = append(testenv.CleanEnv(), "SECKILL_EDGE_REDIS_TIMEOUT=2s", "SECKILL_ENGINE_OCCUPY_TIMEOUT=2s")
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
	waitHTTP(t, "http://"+pub+"/readyz", exited, &logs)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}, Timeout: 15 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	type answer struct {
		status, retryAfter int
		Code               string `json:"code"`
		RequestNo          string `json:"requestNo"`
		Token              string `json:"token"`
	}
	post := func(path string, user int64, body string) answer {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+pub+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-User-Id", strconv.FormatInt(user, 10))
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return answer{}
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode}
		a.retryAfter, _ = strconv.Atoi(resp.Header.Get("Retry-After"))
		_ = json.NewDecoder(resp.Body).Decode(&a)
		return a
	}
	const orderPath = "/api/v1/flash-sale/order"

	// The crowd: 3,000 distinct buyers, 64 at a time, on the demo's SKU
	// 1001 (1,000 units, one per buyer). A 429 (the admission gate) is a
	// designed answer; the buyer comes back after Retry-After, as a crowd
	// does — within a minute, so that limits which turn the crowd away
	// (the production per-address limit) fail the test soon.
	crowdDeadline := time.Now().Add(time.Minute)
	type got struct {
		user int64
		a    answer
	}
	out := make(chan got, 3000)
	work := make(chan int64)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for u := range work {
				a := post(orderPath, u, `{"skuId":1001,"quantity":1}`)
				for try := 0; a.status == 429 && try < 10 && time.Now().Before(crowdDeadline); try++ {
					time.Sleep(time.Duration(max(a.retryAfter, 1)) * time.Second)
					a = post(orderPath, u, `{"skuId":1001,"quantity":1}`)
				}
				out <- got{u, a}
			}
		})
	}
	for u := int64(1); u <= 3000; u++ {
		work <- 1_000_000 + u
	}
	close(work)
	wg.Wait()
	close(out)
	statuses := map[int]int{}
	tickets := map[string]bool{}
	for g := range out {
		statuses[g.a.status]++
		switch {
		case g.a.status == 200 && g.a.RequestNo != "" && !tickets[g.a.RequestNo]:
			tickets[g.a.RequestNo] = true
		case g.a.status == 410 && g.a.Code == "SOLD_OUT":
		default:
			t.Errorf("buyer %d: %d %+v", g.user, g.a.status, g.a)
		}
	}
	if len(tickets) != 1000 {
		t.Fatalf("the crowd got %d tickets (answers by status %v), want the demo SKU's 1000", len(tickets), statuses)
	}
	t.Logf("3,000 buyers: answers by status %v", statuses)

	// The orders land; the dev admin token (dev.yaml's) is accepted.
	admin := func(method, path string, in, outv any) int {
		t.Helper()
		var body bytes.Buffer
		if in != nil {
			_ = json.NewEncoder(&body).Encode(in)
		}
		req, _ := http.NewRequest(method, "http://"+adm+path, &body)
		req.Header.Set("Authorization", "Bearer dev-admin-token")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if outv != nil {
			_ = json.NewDecoder(resp.Body).Decode(outv)
		}
		return resp.StatusCode
	}
	testenv.EventuallyOK(t, "SKU 1001's orders in the stock report", 60*time.Second, func() error {
		var rep struct {
			SKUs []struct{ SKUID, Ordered, Remaining, Occupied, Drift int64 }
		}
		if st := admin("GET", "/admin/v1/activities/1/stock", nil, &rep); st != 200 {
			t.Fatalf("admin stock with the dev admin token: %d", st)
		}
		var k1001 *struct{ SKUID, Ordered, Remaining, Occupied, Drift int64 }
		for i := range rep.SKUs {
			if rep.SKUs[i].SKUID == 1001 {
				k1001 = &rep.SKUs[i]
			}
		}
		if k1001 != nil && k1001.Ordered == 1000 && k1001.Remaining == 0 && k1001.Occupied == 0 && k1001.Drift == 0 {
			return nil
		}
		return fmt.Errorf("SKU 1001 never showed 1000 orders, remaining 0, drift 0: %+v", rep.SKUs)
	})

	// Tokens: a requireToken sale with one reserved buyer.
	now := time.Now()
	act := sale.Activity{ID: 7, Start: now.Add(-time.Minute).Truncate(time.Second), End: now.Add(time.Hour).Truncate(time.Second),
		State: sale.StateOnline, RequireToken: true, ReservedUsers: []int64{4242},
		SKUs: []sale.SKU{{ID: 7001, Stock: 10, Price: 990, LimitPerUser: 1}}}
	if st := admin("POST", "/admin/v1/activities", act, nil); st != 200 {
		t.Fatalf("create the token sale: %d", st)
	}
	const tokenPath = "/api/v1/flash-sale/token"
	var tok answer
	testenv.EventuallyOK(t, "the edge's catalog to know the token sale", 15*time.Second, func() error {
		// 404 until the edge's catalog knows the new sale.
		if tok = post(tokenPath, 4242, `{"activityId":7,"skuId":7001}`); tok.status == 404 {
			return fmt.Errorf("token: %d %+v", tok.status, tok)
		}
		return nil
	})
	if tok.status != 200 || tok.Token == "" {
		t.Fatalf("token for the reserved buyer: %d %+v, want 200 and a token (503: no token keys)", tok.status, tok)
	}
	if a := post(tokenPath, 4243, `{"activityId":7,"skuId":7001}`); a.status != 403 || a.Code != "NOT_RESERVED" {
		t.Fatalf("token for a buyer not reserved: %d %+v, want 403 NOT_RESERVED", a.status, a)
	}
	if a := post(orderPath, 4242, `{"activityId":7,"skuId":7001,"quantity":1}`); a.status != 403 || a.Code != "TOKEN_REQUIRED" {
		t.Fatalf("purchase without the token: %d %+v, want 403 TOKEN_REQUIRED", a.status, a)
	}
	body := fmt.Sprintf(`{"activityId":7,"skuId":7001,"quantity":1,"token":%q}`, tok.Token)
	if a := post(orderPath, 4242, body); a.status != 200 || a.RequestNo == "" {
		t.Fatalf("purchase with the token: %d %+v, want 200 and a ticket", a.status, a)
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
