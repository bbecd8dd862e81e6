package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAdminRiskCallsTheSwitch: `seckill admin risk ACTIVITY allow|deny`
// PUTs the policy to the admin API with the token and tells what it means;
// bad arguments never reach the API, the API's refusal is an error.
func TestAdminRiskCallsTheSwitch(t *testing.T) {
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
		mu.Unlock()
		if strings.Contains(r.URL.Path, "/99/") {
			w.WriteHeader(404)
			io.WriteString(w, `{"code":"NOT_FOUND","message":"activity 99: unknown activity"}`)
			return
		}
		io.WriteString(w, `{"activityId":1,"onError":"deny"}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	admin := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runAdmin(append([]string{"--addr", "http://" + ln.Addr().String(), "--token", "tok"}, args...), &out)
		return out.String(), err
	}

	out, err := admin("risk", "1", "DENY")
	if err != nil || !strings.Contains(out, "activity 1: when the risk service times out or fails, purchases are answered 503 BUSY") {
		t.Fatalf("risk 1 deny: %v\n%s", err, out)
	}
	if out, err = admin("--json", "risk", "1", "allow"); err != nil || !strings.Contains(out, `"onError"`) {
		t.Fatalf("--json risk 1 allow: %v\n%s", err, out)
	}
	if _, err = admin("risk", "99", "deny"); err == nil || !strings.Contains(err.Error(), "404 NOT_FOUND") {
		t.Fatalf("unknown activity: %v", err)
	}
	for _, bad := range [][]string{{"risk", "1"}, {"risk", "x", "deny"}, {"risk", "1", "maybe"}} {
		if _, err := admin(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{
		`PUT /admin/v1/activities/1/risk Bearer tok {"onError":"deny"}`,
		`PUT /admin/v1/activities/1/risk Bearer tok {"onError":"allow"}`,
		`PUT /admin/v1/activities/99/risk Bearer tok {"onError":"deny"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
