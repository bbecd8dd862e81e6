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

// stubAdmin is an admin API that records each call ("METHOD uri
// Authorization body") and answers from answers (by "METHOD uri"; others
// 404 NOT_FOUND). run is `seckill admin` against it with the token "tok".
func stubAdmin(t *testing.T, answers map[string]string) (run func(args ...string) (string, error), calls func() []string) {
	t.Helper()
	var mu sync.Mutex
	var got []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.RequestURI()
		mu.Lock()
		got = append(got, strings.TrimSpace(key+" "+r.Header.Get("Authorization")+" "+string(b)))
		mu.Unlock()
		a, ok := answers[key]
		if !ok {
			w.WriteHeader(404)
			io.WriteString(w, `{"code":"NOT_FOUND","message":"activity 99: unknown activity"}`)
			return
		}
		io.WriteString(w, a)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	run = func(args ...string) (string, error) {
		var out bytes.Buffer
		err := runAdmin(append([]string{"--addr", "http://" + ln.Addr().String(), "--token", "tok"}, args...), &out)
		return out.String(), err
	}
	calls = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	return run, calls
}

// TestAdminDegradeAndRoutesPrintTables: `seckill admin degrade` and
// `seckill admin routes` read and set the switches through the admin API
// and print tables; bad arguments never reach the API.
func TestAdminDegradeAndRoutesPrintTables(t *testing.T) {
	view := `{"activityId":7,"reservedOnly":true,"pollAfterMs":3000,"reserved":2}`
	routes := `[{"name":"orders","open":true},{"name":"pay","open":false},{"name":"events","open":true}]`
	run, calls := stubAdmin(t, map[string]string{
		"GET /admin/v1/degrade":              "[" + view + "]",
		"PUT /admin/v1/activities/7/degrade": view,
		"GET /admin/v1/routes":               routes,
		"PUT /admin/v1/routes/pay":           routes,
	})
	for _, tc := range []struct {
		args []string
		want []string // lines of the table, fields collapsed to one space
	}{
		{[]string{"degrade"}, []string{"ACTIVITY RESERVED ONLY RESERVED USERS POLL AFTER PAUSED", "7 yes 2 3s no"}},
		{[]string{"degrade", "7", "reservedOnly=on", "pollAfterMs=3000"}, []string{"7 yes 2 3s no"}},
		{[]string{"routes"}, []string{"ROUTE STATE", "orders open", "pay CLOSED (503 + Retry-After)", "events open"}},
		{[]string{"routes", "pay", "closed"}, []string{"pay CLOSED (503 + Retry-After)"}},
	} {
		printsLines(t, run, tc.args, tc.want)
	}
	for _, bad := range [][]string{
		{"degrade", "x", "paused=on"}, {"degrade", "7"}, {"degrade", "7", "paused"}, {"degrade", "7", "paused=maybe"},
		{"degrade", "7", "pollAfterMs=60001"}, {"degrade", "7", "speed=1"}, {"routes", "pay"}, {"routes", "pay", "ajar"},
		{"routes", "../x", "open"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if _, err := run("routes", "checkout", "closed"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown route: %v, want the API's 404", err)
	}
	want := []string{
		"GET /admin/v1/degrade Bearer tok",
		`PUT /admin/v1/activities/7/degrade Bearer tok {"pollAfterMs":3000,"reservedOnly":true}`,
		"GET /admin/v1/routes Bearer tok",
		`PUT /admin/v1/routes/pay Bearer tok {"open":false}`,
		`PUT /admin/v1/routes/checkout Bearer tok {"open":false}`,
	}
	if got := calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAdminRiskUncheckedPrintsTheRecords: `seckill admin risk unchecked`
// lists the records with their re-check, filtered by --state.
func TestAdminRiskUncheckedPrintsTheRecords(t *testing.T) {
	run, calls := stubAdmin(t, map[string]string{
		"GET /admin/v1/risk/unchecked?limit=100&state=deny": `{"total":3,"records":[{"requestNo":"7-1001-5","userId":3,"activityId":7,` +
			`"skuId":1001,"quantity":1,"ip":"203.0.113.7","why":"open","atMs":1800000000000,"state":"deny","action":"user blocked"}]}`,
	})
	out, err := run("risk", "unchecked", "--state", "deny")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"3 purchase(s) passed without a risk verdict (1 shown)",
		"7-1001-5 3 7 1001 1 203.0.113.7 - open 2027-01-15T08:00:00Z deny user blocked"} {
		if !strings.Contains(flat, want) {
			t.Errorf("printed\n%s\nwithout %q", out, want)
		}
	}
	if _, err := run("risk", "unchecked", "--limit", "0"); err == nil {
		t.Error("--limit 0: no error")
	}
	if got := calls(); len(got) != 1 {
		t.Errorf("calls %v, want the one list", got)
	}
}

// printsLines runs `seckill admin args` and fails unless its output holds
// each of want, with the output's fields collapsed to one space.
func printsLines(t *testing.T, run func(args ...string) (string, error), args, want []string) {
	t.Helper()
	out, err := run(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, line := range want {
		if !strings.Contains(flat, line) {
			t.Errorf("%v printed\n%s\nwithout %q", args, out, line)
		}
	}
}
