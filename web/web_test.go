package web

import (
	"bufio"
	"context"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"seckill/edge"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func serve(t *testing.T, res *results.Store) string {
	t.Helper()
	r := router.New()
	h := NewResultEvents(res, nil, edge.StreamConfig{Recheck: 20 * time.Millisecond, MaxWait: 3 * time.Second}, nil)
	r.GET("/api/v1/flash-sale/result/{requestNo}/events", h.Handle)
	r.GET("/sale", Buyer)
	r.GET("/sale/{file}", Buyer)
	return listen(t, r)
}

// listen serves r on a loopback port until the test ends.
func listen(t *testing.T, r *router.Router) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: r.Handler}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return "http://" + ln.Addr().String()
}

func get(t *testing.T, url string, user string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if user != "" {
		req.Header.Set("X-User-Id", user)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestResultStreamFollowsTheTicketToItsEnd(t *testing.T) {
	r := testenv.StartRedis(t)
	res := results.New(r.Client(t), nil, time.Hour)
	base := serve(t, res)
	ctx := context.Background()
	q := results.Entry{RequestNo: "1-1001-42", Activity: 1, SKU: 1001, Owner: 7, State: sale.ResultQueuing}
	if err := res.Write(ctx, q); err != nil {
		t.Fatal(err)
	}
	resp := get(t, base+"/api/v1/flash-sale/result/1-1001-42/events", "7")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	go func() {
		time.Sleep(150 * time.Millisecond)
		s := q
		s.State, s.OrderNo = sale.ResultSuccess, "O42"
		_ = res.Write(ctx, s)
	}()
	sc := bufio.NewScanner(resp.Body)
	var data []string
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: ") {
			data = append(data, l[6:])
		}
	}
	if len(data) != 2 || !strings.Contains(data[0], `"QUEUING"`) || !strings.Contains(data[1], `"SUCCESS"`) || !strings.Contains(data[1], `"O42"`) {
		t.Fatalf("events %q, want QUEUING then SUCCESS with the order, then the end of the stream", data)
	}
}

func TestResultStreamIsOwnerOnly(t *testing.T) {
	r := testenv.StartRedis(t)
	res := results.New(r.Client(t), nil, time.Hour)
	base := serve(t, res)
	if err := res.Write(context.Background(), results.Entry{RequestNo: "1-1001-42", Activity: 1, SKU: 1001, Owner: 7, State: sale.ResultFail, Code: sale.FailBusy}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, user, rn string
		status         int
	}{
		{"another user gets not found", "8", "1-1001-42", 404},
		{"an unknown ticket is not found", "7", "43", 404},
		{"no user is unauthorized", "", "1-1001-42", 401},
		{"a signed user id is malformed, as on the order route", "+7", "1-1001-42", 400},
		{"a user id with letters is malformed", "7a", "1-1001-42", 400},
		{"the owner gets the final answer", "7", "1-1001-42", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := get(t, base+"/api/v1/flash-sale/result/"+tc.rn+"/events", tc.user)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 200 {
				b, _ := io.ReadAll(resp.Body)
				if !strings.Contains(string(b), `"reason":"BUSY"`) {
					t.Fatalf("body %s", b)
				}
			}
		})
	}
}

func TestBuyerAssetsAreCacheable(t *testing.T) {
	base := serve(t, nil)
	for _, p := range []string{"/sale", "/sale/buyer.js", "/sale/style.css"} {
		resp := get(t, base+p, "")
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "public, max-age=60" {
			t.Fatalf("%s: %d %q", p, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
	}
	if resp := get(t, base+"/sale/oncall.js", ""); resp.StatusCode != 404 {
		t.Fatalf("the on-call script must not be served on the public listener: %d", resp.StatusCode)
	}
}

// Redis loses the ticket's result while the buyer listens: the stream goes
// on from the fallback (the orders database in the app) and ends with it.
func TestResultStreamFallsBackWhenRedisLosesTheResult(t *testing.T) {
	r := testenv.StartRedis(t)
	res := results.New(r.Client(t), nil, time.Hour)
	ctx := context.Background()
	q := results.Entry{RequestNo: "1-1001-42", Activity: 1, SKU: 1001, Owner: 7, State: sale.ResultQueuing}
	if err := res.Write(ctx, q); err != nil {
		t.Fatal(err)
	}
	asked := make(chan string, 16)
	h := NewResultEvents(res, nil, edge.StreamConfig{Recheck: 20 * time.Millisecond, MaxWait: 3 * time.Second},
		func(_ context.Context, _ int64, rn string) (results.Entry, error) {
			asked <- rn
			if rn != "1-1001-42" {
				return results.Entry{}, results.ErrNotFound
			}
			s := q
			s.State, s.OrderNo = sale.ResultSuccess, "O42"
			return s, nil
		})
	h.fallbackPoll = 20 * time.Millisecond
	rt := router.New()
	rt.GET("/e/{requestNo}", h.Handle)
	base := listen(t, rt)

	resp := get(t, base+"/e/1-1001-42", "7")
	sc := bufio.NewScanner(resp.Body)
	var data []string
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "data: ") {
			continue
		}
		data = append(data, l[6:])
		if len(data) == 1 {
			// QUEUING came from Redis; now Redis forgets the ticket.
			if err := r.Do(t, "HDEL", sale.ResultsKey(1, 1001), "1-1001-42").Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(data) != 2 || !strings.Contains(data[0], `"QUEUING"`) || !strings.Contains(data[1], `"SUCCESS"`) || !strings.Contains(data[1], `"O42"`) {
		t.Fatalf("events %q, want QUEUING from Redis then SUCCESS from the fallback", data)
	}
	if resp := get(t, base+"/e/1-1001-43", "7"); resp.StatusCode != 404 {
		t.Fatalf("a ticket neither knows: %d", resp.StatusCode)
	}
	if resp := get(t, base+"/e/1-1001-42", "8"); resp.StatusCode != 404 {
		t.Fatalf("another user: %d", resp.StatusCode)
	}
	if len(asked) == 0 {
		t.Fatal("the fallback was never asked")
	}
}

// uPlotVersion is the vendored chart library's pinned version
// (static/uplot/README.md).
const uPlotVersion = "1.6.32"

func TestOnCallServesTheChartLibrary(t *testing.T) {
	r := router.New()
	r.GET("/admin/ui", OnCall)
	r.GET("/admin/ui/{file:*}", OnCall)
	base := listen(t, r)
	page := get(t, base+"/admin/ui", "")
	html, _ := io.ReadAll(page.Body)
	for _, tc := range []struct {
		file, contentType, contains string
	}{
		{"uplot/uPlot.iife.min.js", "text/javascript", "uPlot (v" + uPlotVersion + ")"},
		{"uplot/uPlot.min.css", "text/css", ".uplot"},
		{"uplot/LICENSE", "text/plain", "MIT License"},
	} {
		resp := get(t, base+"/admin/ui/"+tc.file, "")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), tc.contentType) || !strings.Contains(string(b), tc.contains) {
			t.Errorf("%s: %d %s, want %q in it", tc.file, resp.StatusCode, resp.Header.Get("Content-Type"), tc.contains)
		}
		if !strings.Contains(string(html), `"/admin/ui/`+tc.file+`"`) {
			t.Errorf("the on-call page does not load %s", tc.file)
		}
	}
	if readme, err := fs.ReadFile(files, "uplot/README.md"); err != nil || !strings.Contains(string(readme), "uPlot "+uPlotVersion) {
		t.Errorf("static/uplot/README.md does not pin %s: %v", uPlotVersion, err)
	}
	for _, p := range []string{"/admin/ui/uplot/README.md", "/admin/ui/uplot/", "/admin/ui/web.go"} {
		if resp := get(t, base+p, ""); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404 (not listed)", p, resp.StatusCode)
		}
	}
	// The buyer's listener does not serve it.
	if resp := get(t, serve(t, nil)+"/sale/uplot/uPlot.iife.min.js", ""); resp.StatusCode != 404 {
		t.Errorf("the chart library on the public listener: %d", resp.StatusCode)
	}
}
