package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"seckill/internal/testenv"
)

// TestDevAndAdminCLI builds the binary, runs `seckill dev` as a real
// process, buys through HTTP, drives every admin CLI command against it and
// stops it with SIGINT.
func TestDevAndAdminCLI(t *testing.T) {
	testenv.Long(t)
	dir := t.TempDir()
	bin := buildSeckill(t, dir)
	pub, adm := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "dev", "--config", "../../configs/dev.yaml", "--data-dir", filepath.Join(dir, "data"),
		"--listen", pub, "--admin-listen", adm)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), "SECKILL_ADMIN_TOKEN=cli-test-token")
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

	// A purchase through the public API.
	req, _ := http.NewRequest("POST", "http://"+pub+"/api/v1/flash-sale/order", strings.NewReader(`{"skuId":1001,"quantity":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-Id", "77")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var ticket struct{ Code, RequestNo string }
	json.NewDecoder(resp.Body).Decode(&ticket)
	resp.Body.Close()
	if resp.StatusCode != 200 || ticket.RequestNo == "" {
		t.Fatalf("buy: %d %+v\n%s", resp.StatusCode, ticket, logs.String())
	}

	admin := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runAdmin(append([]string{"--addr", "http://" + adm, "--token", "cli-test-token"}, args...), &out)
		return out.String(), err
	}
	mustAdmin := func(args ...string) string {
		t.Helper()
		out, err := admin(args...)
		if err != nil {
			t.Fatalf("admin %v: %v\n%s", args, err, out)
		}
		return out
	}

	if out := mustAdmin("activities"); !strings.Contains(out, "1001×1000@99.00") || !strings.Contains(out, "1002×50000@99.00 hot") {
		t.Fatalf("activities:\n%s", out)
	}
	// The order lands: stock shows it, drift 0.
	testenv.EventuallyOK(t, "the stock to show the order", 10*time.Second, func() error {
		out := mustAdmin("--json", "stock", "1")
		var rep struct {
			SKUs []struct{ SKUID, Ordered, Remaining, Drift int64 }
		}
		json.Unmarshal([]byte(out), &rep)
		if len(rep.SKUs) == 2 && rep.SKUs[0].Ordered == 1 && rep.SKUs[0].Remaining == 999 && rep.SKUs[0].Drift == 0 {
			return nil
		}
		return fmt.Errorf("stock never showed the order:\n%s", out)
	})
	if out := mustAdmin("stock", "1"); !strings.Contains(out, "DRIFT") || !strings.Contains(out, "1001") {
		t.Fatalf("stock table:\n%s", out)
	}
	if out := mustAdmin("request", ticket.RequestNo); !strings.HasPrefix(rowText(out, "order"), "order O"+ticket.RequestNo+" PENDING_PAYMENT ") ||
		!hasRow(out, "answer order O"+ticket.RequestNo+" is PENDING_PAYMENT") || !hasRow(out, "AT STEP REMARK") {
		t.Fatalf("request story:\n%s", out)
	}
	if out := mustAdmin("request", ticket.RequestNo, "--json"); !strings.Contains(out, `"orderNo": "O`+ticket.RequestNo) {
		t.Fatalf("request story --json:\n%s", out)
	}
	// Support's lookup: the buyer's second attempt is refused as a
	// duplicate; `why` tells both, newest first.
	req, _ = http.NewRequest("POST", "http://"+pub+"/api/v1/flash-sale/order", strings.NewReader(`{"skuId":1001,"quantity":1}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-User-Id", "77")
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 409 {
		t.Fatalf("buy again: %v %v", resp, err)
	}
	resp.Body.Close()
	testenv.EventuallyOK(t, "why to tell the duplicate", 10*time.Second, func() error {
		out := mustAdmin("why", "77", "1")
		rejected, success := -1, -1
		for i, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) > 6 && f[4] == "REJECTED" && f[5] == "DUPLICATE" && f[6] == "-":
				rejected = i
			case len(f) > 6 && f[4] == "SUCCESS" && f[6] == ticket.RequestNo:
				success = i
			}
		}
		if !hasRow(out, "AT ACTIVITY SKU QTY OUTCOME REASON TICKET ORDER TRACE") || rejected < 0 || success < rejected {
			return fmt.Errorf("why 77 1:\n%s", out)
		}
		return nil
	})
	if out := mustAdmin("why", "77", "--json", "--limit", "1"); !strings.Contains(out, `"outcome": "REJECTED"`) || !strings.Contains(out, `"next": "`) {
		t.Fatalf("why --json --limit 1:\n%s", out)
	}
	for _, bad := range [][]string{{"why"}, {"why", "x"}, {"why", "77", "0"}} {
		if _, err := admin(bad...); err == nil {
			t.Errorf("admin %v: no error", bad)
		}
	}
	if out := mustAdmin("soldout", "1002", "true"); !hasRow(out, "ACTIVITY SKU MARK SOLD OUT REMAINING") || !hasRow(out, "1 1002 on yes 50000") {
		t.Fatalf("soldout:\n%s", out)
	}
	if out := mustAdmin("--json", "soldout", "1002", "false"); !strings.Contains(out, `"soldOut": false`) {
		t.Fatalf("soldout false --json:\n%s", out)
	}
	if out := mustAdmin("restock", "1001", "5"); !hasRow(out, "ACTIVITY SKU ADDED REMAINING INITIAL") || !hasRow(out, "1 1001 5 1004 1005") {
		t.Fatalf("restock:\n%s", out)
	}
	if out := mustAdmin("state", "1", "offline"); !hasRow(out, "ID STATE START END TOKEN SKUS") || !strings.HasPrefix(rowText(out, "1"), "1 OFFLINE ") {
		t.Fatalf("state:\n%s", out)
	}
	if out := mustAdmin("state", "1", "ONLINE", "--json"); !strings.Contains(out, `"state": "ONLINE"`) {
		t.Fatalf("state --json:\n%s", out)
	}
	if out := mustAdmin("lag"); !hasRow(out, "PARTITION LAG") || !strings.HasPrefix(rowText(out, "total"), "total ") {
		t.Fatalf("lag:\n%s", out)
	}
	if out := mustAdmin("lag", "--json"); !strings.Contains(out, `"total": `) || !strings.Contains(out, `"partitions": {`) {
		t.Fatalf("lag --json:\n%s", out)
	}
	if out := mustAdmin("reconcile"); !hasRow(out, "2 SKUs, 0 drifts, 0 repairs") {
		t.Fatalf("reconcile:\n%s", out)
	}
	if out := mustAdmin("reconcile", "--repair", "--json"); !strings.Contains(out, `"repair": true`) {
		t.Fatalf("reconcile --repair --json:\n%s", out)
	}

	f := filepath.Join(dir, "act.json")
	now := time.Now().UTC()
	os.WriteFile(f, []byte(fmt.Sprintf(`{"id":7,"start":%q,"end":%q,"requireToken":false,"skus":[{"id":7001,"stock":10,"price":"9.90","limitPerUser":1,"hot":false}]}`,
		now.Add(-time.Minute).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))), 0o644)
	if out := mustAdmin("create", f); !strings.HasPrefix(rowText(out, "7"), "7 ONLINE ") || !strings.Contains(out, "7001×10@9.90") {
		t.Fatalf("create:\n%s", out)
	}
	if out := mustAdmin("stock", "7"); !strings.Contains(out, "7001") {
		t.Fatalf("stock of the new activity:\n%s", out)
	}

	// Blocklists: a blocked user is refused at the edge at once, and buys
	// again once unblocked.
	// post sends a purchase body; an empty object buys nothing (400) unless
	// the user is blocked (403: the blocklist is checked first).
	post := func(user, body string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", "http://"+pub+"/api/v1/flash-sale/order", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-User-Id", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitStatus := func(user string, want int) {
		t.Helper()
		testenv.EventuallyOK(t, "user "+user+"'s answer", 5*time.Second, func() error {
			if got := post(user, `{}`); got != want {
				return fmt.Errorf("user %s: %d, want %d", user, got, want)
			}
			return nil
		})
	}
	if out := mustAdmin("block", "user", "4242"); !hasRow(out, "KIND ENTRY STATE CHANGED") || !hasRow(out, "user 4242 blocked yes") {
		t.Fatalf("block user:\n%s", out)
	}
	waitStatus("4242", 403)
	if out := mustAdmin("block", "ip", "203.0.113.9/24"); !hasRow(out, "ip 203.0.113.0/24 blocked yes") {
		t.Fatalf("block ip:\n%s", out)
	}
	if out := mustAdmin("blocklist"); !strings.Contains(out, "4242") || !strings.Contains(out, "203.0.113.0/24") || !strings.Contains(out, "admin") {
		t.Fatalf("blocklist:\n%s", out)
	}
	if out := mustAdmin("--json", "blocklist"); !strings.Contains(out, `"203.0.113.0/24"`) {
		t.Fatalf("blocklist --json:\n%s", out)
	}
	if out := mustAdmin("unblock", "ip", "203.0.113.0/24"); !hasRow(out, "ip 203.0.113.0/24 not blocked yes") {
		t.Fatalf("unblock ip:\n%s", out)
	}
	if out := mustAdmin("unblock", "user", "4242"); !hasRow(out, "user 4242 not blocked yes") {
		t.Fatalf("unblock user:\n%s", out)
	}
	waitStatus("4242", 400)
	if got := post("4242", `{"skuId":1001,"quantity":1}`); got != 200 {
		t.Fatalf("user 4242 after unblock: %d, want 200", got)
	}
	if _, err := admin("block", "host", "x"); err == nil {
		t.Fatal("block host must fail")
	}
	if _, err := admin("block", "ip", "not-an-ip"); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("block ip not-an-ip: %v, want the API's 400", err)
	}

	// A wrong token is refused, and the CLI says so.
	var out bytes.Buffer
	if err := runAdmin([]string{"--addr", "http://" + adm, "--token", "wrong", "stock", "1"}, &out); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("wrong token: %v", err)
	}
	if err := runAdmin([]string{"--addr", "http://" + adm, "bogus"}, &out); err == nil {
		t.Fatal("an unknown command must fail")
	}

	// SIGINT drains and exits 0.
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("seckill dev exited with %v\n%s", err, logs.String())
		}
		exited <- nil
	case <-time.After(30 * time.Second):
		t.Fatalf("seckill dev did not stop on SIGINT\n%s", logs.String())
	}
}

// rowText is the table row of out whose first field is first, its fields
// joined by one space ("" if none).
func rowText(out, first string) string { return strings.Join(rowOf(out, first), " ") }

// hasRow reports whether a line of out reads row, however the table
// spaced its columns.
func hasRow(out, row string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Join(strings.Fields(l), " ") == row {
			return true
		}
	}
	return false
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHTTP waits up to a minute for url to answer 200 while the process
// whose Wait answers on exited runs; a failure quotes its logs.
func waitHTTP(t *testing.T, url string, exited chan error, logs fmt.Stringer) {
	t.Helper()
	testenv.EventuallyOK(t, url+" to answer 200", 60*time.Second, func() error {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup, which waits on it
			t.Fatalf("seckill dev exited early: %v\n%s", err, logs.String())
		default:
		}
		return fmt.Errorf("%s not ready: %v\n%s", url, err, logs.String())
	})
}
