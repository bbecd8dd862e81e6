package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"seckill/admin"
	"seckill/admin/admintest"
	"seckill/admin/client"
	"seckill/internal/testenv"
	"seckill/sale"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func ptr[T any](v T) *T { return &v }

// TestEveryRouteThroughTheClient drives every admin route through its
// client method against the real handlers (real Redis, SQLite, Kafka
// protocol, reconciler) and checks what each answer says, and what the
// stores hold afterwards.
func TestEveryRouteThroughTheClient(t *testing.T) {
	r := admintest.Start(t)
	c := client.New(r.URL+"/", admintest.Token, nil)
	ctx := context.Background()

	acts, err := c.Activities(ctx)
	if err != nil || len(acts) != 1 || acts[0].ID != admintest.Activity || len(acts[0].SKUs) != 2 {
		t.Fatalf("Activities: %+v, %v", acts, err)
	}
	a := acts[0]
	a.SKUs = append(a.SKUs, sale.SKU{ID: 12, Stock: 7, Price: 500, LimitPerUser: 1})
	if got, err := c.CreateActivity(ctx, a); err != nil || len(got.SKUs) != 3 {
		t.Fatalf("CreateActivity: %+v, %v", got, err)
	}
	if got, err := c.SetState(ctx, admintest.Activity, sale.StateOffline); err != nil || got.State != sale.StateOffline {
		t.Fatalf("SetState: %+v, %v", got, err)
	}
	if got, ok := r.Stock.Catalog().Activity(admintest.Activity); !ok || got.State != sale.StateOffline {
		t.Fatalf("catalog after SetState: %+v", got)
	}
	if _, err := c.SetState(ctx, admintest.Activity, sale.StateOnline); err != nil {
		t.Fatal(err)
	}
	if got, err := c.SetRisk(ctx, admintest.Activity, sale.RiskDeny); err != nil || got != (admin.RiskAnswer{ActivityID: 1, OnError: sale.RiskDeny}) {
		t.Fatalf("SetRisk: %+v, %v", got, err)
	}
	if got, err := c.Unchecked(ctx, "pending", 5); err != nil || got.Total != 0 || got.Records == nil {
		t.Fatalf("Unchecked: %+v, %v", got, err)
	}
	if got, err := c.SetDegrade(ctx, admintest.Activity, admin.DegradeChange{PollAfterMs: ptr[int64](1500), Paused: ptr(true)}); err != nil ||
		got.PollAfterMs != 1500 || !got.Paused || got.ReservedOnly {
		t.Fatalf("SetDegrade: %+v, %v", got, err)
	}
	if got, err := c.Degrade(ctx); err != nil || len(got) != 1 || got[0].PollAfterMs != 1500 || !got[0].Paused {
		t.Fatalf("Degrade: %+v, %v", got, err)
	}
	if got, err := c.SetSoldOut(ctx, 11, admin.SoldOutChange{SoldOut: ptr(true)}); err != nil || !got.Marked || !got.SoldOut || got.Remaining != 5 {
		t.Fatalf("SetSoldOut: %+v, %v", got, err)
	}
	if got, err := c.Restock(ctx, admintest.SKU, admin.RestockRequest{Units: 3, ActivityID: admintest.Activity}); err != nil ||
		got.Added != 3 || got.Remaining != 8 || got.Initial != 8 {
		t.Fatalf("Restock: %+v, %v", got, err)
	}
	rep, err := c.Stock(ctx, admintest.Activity)
	if err != nil || len(rep.SKUs) != 3 {
		t.Fatalf("Stock: %+v, %v", rep, err)
	}
	if s := rep.SKUs[0]; s.SKUID != admintest.SKU || s.Remaining != 8 || s.Orders != 1 || s.Ordered != 1 {
		t.Errorf("Stock of sku %d: %+v", admintest.SKU, s)
	}
	if s := rep.SKUs[1]; !s.Marked || !s.SoldOut {
		t.Errorf("Stock of the marked sku: %+v", s)
	}
	st, err := c.Request(ctx, admintest.Ticket)
	if err != nil || st.Order == nil || st.Order.OrderNo == "" || st.Result == nil || st.Result.State != sale.ResultSuccess {
		t.Fatalf("Request: %+v, %v", st, err)
	}
	ur, err := c.UserRequests(ctx, admintest.User, admintest.Activity, "", 5)
	if err != nil || ur.UserID != admintest.User || len(ur.Requests) != 1 || ur.Requests[0].RequestNo != admintest.Ticket {
		t.Fatalf("UserRequests: %+v, %v", ur, err)
	}
	recon, err := c.Reconcile(ctx, false)
	if err != nil || recon.Repair || len(recon.SKUs) != 3 {
		t.Fatalf("Reconcile: %+v, %v", recon, err)
	}
	if lag, err := c.Lag(ctx); err != nil || lag.Total != 0 || len(lag.Partitions) != 2 {
		t.Fatalf("Lag: %+v, %v", lag, err)
	}
	q := "queue"
	if m, err := c.SetMode(ctx, 10, admin.ModeChange{Mode: &q, Rate: ptr[int64](500)}); err != nil || m.Mode != "queue" || m.Rate != 500 || m.SKUID != 10 {
		t.Fatalf("SetMode: %+v, %v", m, err)
	}
	if m, err := c.Mode(ctx, 10, admintest.Activity); err != nil || m.Mode != "queue" || m.ActivityID != admintest.Activity {
		t.Fatalf("Mode: %+v, %v", m, err)
	}
	if ms, err := c.Modes(ctx); err != nil || len(ms) == 0 {
		t.Fatalf("Modes: %+v, %v", ms, err)
	}
	if p, err := c.Prequeue(ctx, 10, 0, false); err != nil || !p.Drawn || p.Cutoff != 3 || p.Served != 3 || p.Order != nil || !p.Done {
		t.Fatalf("Prequeue: %+v, %v", p, err)
	}
	if p, err := c.Prequeue(ctx, 10, admintest.Activity, true); err != nil || fmt.Sprint(p.Order) != "[2 0 1]" {
		t.Fatalf("Prequeue with the order: %+v, %v", p, err)
	}
	if rs, err := c.Routes(ctx); err != nil || len(rs) != 3 || !rs[0].Open {
		t.Fatalf("Routes: %+v, %v", rs, err)
	}
	rs, err := c.SetRoute(ctx, "orders", false)
	if err != nil || len(rs) != 3 {
		t.Fatalf("SetRoute: %+v, %v", rs, err)
	}
	for _, v := range rs {
		if v.Open == (v.Name == "orders") {
			t.Errorf("after closing orders: %+v", v)
		}
	}
	if got, err := c.BlockIP(ctx, "10.0.0.0/8"); err != nil || got.IP != "10.0.0.0/8" || !got.Blocked || !got.Changed {
		t.Fatalf("BlockIP: %+v, %v", got, err)
	}
	if got, err := c.BlockUser(ctx, 5); err != nil || got.User != 5 || !got.Blocked || !got.Changed {
		t.Fatalf("BlockUser: %+v, %v", got, err)
	}
	bl, err := c.Blocklist(ctx)
	if err != nil || !reflect.DeepEqual(bl.IPs, []string{"10.0.0.0/8"}) || !reflect.DeepEqual(bl.Users, []int64{5}) ||
		!reflect.DeepEqual(bl.Configured.Users, []int64{7}) {
		t.Fatalf("Blocklist: %+v, %v", bl, err)
	}
	if got, err := c.UnblockIP(ctx, "10.0.0.0/8"); err != nil || got.Blocked || !got.Changed {
		t.Fatalf("UnblockIP: %+v, %v", got, err)
	}
	if got, err := c.UnblockUser(ctx, 5); err != nil || got.Blocked || !got.Changed {
		t.Fatalf("UnblockUser: %+v, %v", got, err)
	}
	if bl, err := c.Blocklist(ctx); err != nil || len(bl.IPs) != 0 || len(bl.Users) != 0 {
		t.Fatalf("Blocklist after unblocking: %+v, %v", bl, err)
	}
}

// TestOneMethodPerRoute: the client has a method for each route the admin
// server registers (and one for the process's counters): a route added
// without one fails here.
func TestOneMethodPerRoute(t *testing.T) {
	s := admin.New("t", admin.Deps{}, zap.NewNop())
	routes := 0
	for _, ps := range s.Router().List() {
		routes += len(ps)
	}
	if n := reflect.TypeFor[*client.Client]().NumMethod(); n != routes+1 {
		t.Fatalf("%d client methods for %d admin routes and the counters", n, routes)
	}
}

// serve answers every request with h on a loopback listener.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestErrorsCarryTheServersCode: a refusal is an *Error with the status
// and the server's code and message; a process without a dependency
// answers 503 UNAVAILABLE.
func TestErrorsCarryTheServersCode(t *testing.T) {
	r := admintest.Start(t)
	ctx := context.Background()
	var e *client.Error
	_, err := client.New(r.URL, "wrong", nil).Activities(ctx)
	if !errors.As(err, &e) || e.Status != 401 || e.Code != "UNAUTHORIZED" || e.Message == "" {
		t.Fatalf("wrong token: %v", err)
	}
	if want := "GET /admin/v1/activities: 401 UNAUTHORIZED: missing or wrong admin token"; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
	c := client.New(r.URL, admintest.Token, nil)
	if _, err := c.Stock(ctx, 99); client.StatusOf(err) != 404 || !errors.As(err, &e) || e.Code != "NOT_FOUND" {
		t.Fatalf("unknown activity: %v", err)
	}
	if _, err := c.SetState(ctx, admintest.Activity, "MAYBE"); client.StatusOf(err) != 400 {
		t.Fatalf("bad state: %v", err)
	}
	if _, err := c.SetRoute(ctx, "nope", true); client.StatusOf(err) != 404 {
		t.Fatalf("unknown route: %v", err)
	}

	bare := admin.New("t", admin.Deps{}, zap.NewNop())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go bare.Serve(ln)
	t.Cleanup(func() { bare.Shutdown(context.Background()) })
	if _, err := client.New("http://"+ln.Addr().String(), "t", nil).Blocklist(ctx); client.StatusOf(err) != 503 ||
		!errors.As(err, &e) || e.Code != "UNAVAILABLE" {
		t.Fatalf("a process without a blocklist store: %v", err)
	}
}

// TestABrokenServerIsAnError: garbage, a wrong shape, a body that never
// ends and no server at all are errors, never a zero answer taken for
// true.
func TestABrokenServerIsAnError(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"garbage with 200", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>ok</html>")) }},
		{"the wrong shape with 200", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"activityId":"one"}`)) }},
		{"an HTML error page", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(502)
			w.Write([]byte("<h1>bad gateway</h1>"))
		}},
		{"an answer cut short", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.Write([]byte(`{"activityId":1,`))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if v, err := client.New(serve(t, c.h), "t", nil).Stock(ctx, 1); err == nil {
				t.Fatalf("no error, answer %+v", v)
			}
		})
	}
	t.Run("a body that never ends is cut at the client's timeout", func(t *testing.T) {
		base := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte(`{"activityId":1,"skus":[`))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		start := time.Now()
		if _, err := client.New(base, "t", &http.Client{Timeout: 300 * time.Millisecond}).Stock(ctx, 1); err == nil {
			t.Fatal("no error")
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
	})
	t.Run("a proxy's error page is an Error with its status", func(t *testing.T) {
		base := serve(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(502)
			w.Write([]byte("<h1>bad gateway</h1>"))
		})
		_, err := client.New(base, "t", nil).Lag(ctx)
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 502 || e.Code != "" || e.Message != "Bad Gateway" || string(e.Body) != "<h1>bad gateway</h1>" {
			t.Fatalf("502 page: %#v", err)
		}
	})
	t.Run("no server", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, err = client.New("http://"+addr, "t", nil).Lag(ctx)
		if err == nil || client.StatusOf(err) != 0 || !strings.Contains(err.Error(), "admin API at http://"+addr) {
			t.Fatalf("no server: %v", err)
		}
	})
}

// TestTokenComesFromTheFileOrTheEnvironment: a file's first line (stdin
// for "-"), else $SECKILL_ADMIN_TOKEN; an empty first line or a missing
// file is an error, never an empty token.
func TestTokenComesFromTheFileOrTheEnvironment(t *testing.T) {
	t.Setenv(client.TokenEnv, "from-env")
	dir := t.TempDir()
	good := filepath.Join(dir, "tok")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("  from-file \nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\nfrom-line-two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file, stdin, want string
		fails                   bool
	}{
		{"no file: the environment", "", "", "from-env", false},
		{"a file: its first line, trimmed", good, "", "from-file", false},
		{"stdin", "-", "from-stdin\nmore", "from-stdin", false},
		{"a file whose first line is empty", empty, "", "", true},
		{"a missing file", filepath.Join(dir, "missing"), "", "", true},
		{"an empty stdin", "-", "", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := client.Token(c.file, strings.NewReader(c.stdin))
			if (err != nil) != c.fails || got != c.want {
				t.Fatalf("Token(%q): %q, %v", c.file, got, err)
			}
		})
	}
}
