package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/router"

	"seckill/sale"
	"seckill/store"
)

// ordersStore opens a SQLite orders database with n orders of user 100
// (one per SKU 1..n of activity 1, created a second apart, the last two
// in the same millisecond) and one of user 200.
func ordersStore(t *testing.T, n int) store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "orders.db")
	clock := time.UnixMilli(time.Now().Add(-time.Hour).UnixMilli())
	st, err := store.Open(cfg, store.WithClock(func() time.Time { return clock }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	a := sale.Activity{ID: 1, Start: clock.Add(-time.Hour), End: clock.Add(2 * time.Hour)}
	for sku := int64(1); sku <= int64(n); sku++ {
		a.SKUs = append(a.SKUs, sale.SKU{ID: sku, Stock: 10, Price: 9900, LimitPerUser: 1})
	}
	if err := st.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	m := func(rn string, sku, user int64) sale.Message {
		return sale.Message{RequestNo: rn, ActivityID: 1, SKUID: sku, UserID: user, Quantity: 1, UnitPrice: 9900,
			AcceptedAt: clock.UnixMilli()}
	}
	for sku := int64(1); sku <= int64(n); sku++ {
		if sku < int64(n) {
			clock = clock.Add(time.Second)
		}
		msgs := []sale.Message{m(fmt.Sprintf("%d", 1000+sku), sku, 100)}
		if sku == 1 {
			msgs = append(msgs, m("9001", sku, 200))
		}
		if _, err := st.SaveBatch(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

type ordersClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *ordersClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *ordersClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// serveOrders serves h on OrdersPath; its clock stands still unless the
// test moves it.
func serveOrders(t *testing.T, st OrderLister, burst int) (string, *ordersClock) {
	t.Helper()
	clk := &ordersClock{now: time.Now()}
	h := NewOrders(st, OrdersConfig{PayTimeout: 15 * time.Minute, PerSecond: 1, Burst: burst, Now: clk.Now})
	r := router.New()
	r.GET(OrdersPath, h.Handle)
	return listen(t, r) + OrdersPath, clk
}

// ordersAnswer is a parsed answer of the route.
type ordersAnswer struct {
	status     int
	retryAfter string
	page       OrdersPage
	code       string
}

func getOrders(t *testing.T, url, user string) ordersAnswer {
	t.Helper()
	resp := get(t, url, user)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := ordersAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: Cache-Control %q", url, resp.Header.Get("Cache-Control"))
	}
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &a.page); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
		return a
	}
	var e struct{ Code string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("%s: %d %v: %s", url, resp.StatusCode, err, b)
	}
	a.code = e.Code
	return a
}

func TestOrdersRouteAnswersTheCallerOnly(t *testing.T) {
	st := ordersStore(t, 3)
	url, _ := serveOrders(t, st, 100)
	a := getOrders(t, url, "100")
	if a.status != 200 || len(a.page.Orders) != 3 || a.page.Next != "" {
		t.Fatalf("user 100: %+v", a)
	}
	// Newest first: SKU 3 and 2 share a millisecond, 2 was written first.
	for i, want := range []string{"O1003", "O1002", "O1001"} {
		o := a.page.Orders[i]
		if o.OrderNo != want || o.RequestNo != want[1:] || o.ActivityID != 1 || o.SKUID != int64(3-i) || o.Quantity != 1 ||
			o.Amount != "99.00" || o.State != store.OrderPendingPayment || !o.PayDeadline.Equal(o.Created.Add(15*time.Minute)) {
			t.Errorf("order %d: %+v, want %s", i, o, want)
		}
	}
	b := getOrders(t, url, "200")
	if b.status != 200 || len(b.page.Orders) != 1 || b.page.Orders[0].OrderNo != "O9001" {
		t.Fatalf("user 200: %+v", b)
	}
	if c := getOrders(t, url, "300"); c.status != 200 || len(c.page.Orders) != 0 {
		t.Fatalf("a user without orders: %+v", c)
	}
}

func TestOrdersRouteRefusesBadInput(t *testing.T) {
	st := ordersStore(t, 3)
	url, _ := serveOrders(t, st, 1000)
	first := getOrders(t, url+"?limit=1", "100")
	if first.status != 200 || first.page.Next == "" {
		t.Fatalf("first page: %+v", first)
	}
	good := first.page.Next
	for _, tc := range []struct {
		name, query, user string
		status            int
		code              string
	}{
		{"no X-User-Id is unauthorized", "", "", 401, "UNAUTHORIZED"},
		{"a user id with a sign is malformed", "", "+100", 400, "BAD_REQUEST"},
		{"a user id of zero is malformed", "", "0", 400, "BAD_REQUEST"},
		{"a user id with letters is malformed", "", "100a", 400, "BAD_REQUEST"},
		{"a user id of 19 digits is malformed", "", "1234567890123456789", 400, "BAD_REQUEST"},
		{"a cursor of garbage is refused", "?cursor=not-a-cursor", "100", 400, "BAD_REQUEST"},
		{"a cursor of zeros is refused", "?cursor=" + cursorEncoding.EncodeToString(append([]byte{cursorVersion}, make([]byte, 16)...)), "100", 400, "BAD_REQUEST"},
		{"a cursor in padded base64 is refused", "?cursor=" + good + "%3D", "100", 400, "BAD_REQUEST"},
		{"a cursor with a character more is refused", "?cursor=" + good + "A", "100", 400, "BAD_REQUEST"},
		{"a cursor of another version is refused", "?cursor=" + cursorEncoding.EncodeToString(append([]byte{2}, make([]byte, 16)...)), "100", 400, "BAD_REQUEST"},
		{"a limit of zero is refused", "?limit=0", "100", 400, "BAD_REQUEST"},
		{"a negative limit is refused", "?limit=-1", "100", 400, "BAD_REQUEST"},
		{"a limit that is no number is refused", "?limit=ten", "100", 400, "BAD_REQUEST"},
		{"the cursor it gave is taken", "?cursor=" + good, "100", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := getOrders(t, url+tc.query, tc.user)
			if a.status != tc.status || a.code != tc.code {
				t.Fatalf("got %d %s, want %d %s", a.status, a.code, tc.status, tc.code)
			}
		})
	}
}

func TestOrdersRoutePagesWithACap(t *testing.T) {
	st := ordersStore(t, MaxOrdersLimit+12)
	url, _ := serveOrders(t, st, 1000)
	if a := getOrders(t, url, "100"); a.status != 200 || len(a.page.Orders) != DefaultOrdersLimit || a.page.Next == "" {
		t.Fatalf("default page: %d orders, next %q", len(a.page.Orders), a.page.Next)
	}
	a := getOrders(t, url+"?limit=1000", "100")
	if a.status != 200 || len(a.page.Orders) != MaxOrdersLimit || a.page.Next == "" {
		t.Fatalf("limit 1000: %d orders (cap %d), next %q", len(a.page.Orders), MaxOrdersLimit, a.page.Next)
	}
	// Someone else's list does not open with user 100's cursor: the
	// cursor is a position, the list is always the caller's.
	if b := getOrders(t, url+"?cursor="+a.page.Next, "200"); b.status != 200 || len(b.page.Orders) != 1 || b.page.Orders[0].OrderNo != "O9001" {
		t.Fatalf("user 200 with user 100's cursor: %+v", b)
	}
	rest := getOrders(t, url+"?limit=1000&cursor="+a.page.Next, "100")
	if rest.status != 200 || len(rest.page.Orders) != 12 || rest.page.Next != "" {
		t.Fatalf("second page: %d orders, next %q", len(rest.page.Orders), rest.page.Next)
	}
	seen := map[string]bool{}
	for _, o := range append(a.page.Orders, rest.page.Orders...) {
		if seen[o.OrderNo] {
			t.Errorf("%s twice", o.OrderNo)
		}
		seen[o.OrderNo] = true
	}
	if len(seen) != MaxOrdersLimit+12 {
		t.Errorf("%d distinct orders over two pages, want %d", len(seen), MaxOrdersLimit+12)
	}
	// An exact fit has no next page.
	if c := getOrders(t, url+"?limit="+strconv.Itoa(12)+"&cursor="+a.page.Next, "100"); len(c.page.Orders) != 12 || c.page.Next != "" {
		t.Fatalf("exact fit: %d orders, next %q", len(c.page.Orders), c.page.Next)
	}
}

func TestOrdersRouteIsRateLimitedPerUser(t *testing.T) {
	st := ordersStore(t, 1)
	url, clk := serveOrders(t, st, 3)
	for i := range 3 {
		if a := getOrders(t, url, "100"); a.status != 200 {
			t.Fatalf("request %d within the burst: %+v", i, a)
		}
	}
	a := getOrders(t, url, "100")
	if a.status != 429 || a.code != "RATE_LIMITED" || a.retryAfter != "1" {
		t.Fatalf("over the burst: %d %s Retry-After %q", a.status, a.code, a.retryAfter)
	}
	if b := getOrders(t, url, "200"); b.status != 200 {
		t.Fatalf("another user is not limited by user 100: %+v", b)
	}
	clk.Add(time.Second)
	if c := getOrders(t, url, "100"); c.status != 200 {
		t.Fatalf("a second later: %+v", c)
	}
	if d := getOrders(t, url, "100"); d.status != 429 {
		t.Fatalf("one per second after the burst: %+v", d)
	}
}

func TestOrdersRouteIsBusyWithoutTheDatabase(t *testing.T) {
	st := ordersStore(t, 1)
	url, _ := serveOrders(t, st, 10)
	st.Close()
	if a := getOrders(t, url, "100"); a.status != 503 || a.code != "BUSY" {
		t.Fatalf("database closed: %+v", a)
	}
}

// FuzzCursor: a cursor is accepted only in the spelling this server gives
// it, and every cursor it gives is accepted as itself.
func FuzzCursor(f *testing.F) {
	f.Add("", int64(1), int64(1))
	f.Add(encodeCursor(store.OrderCursor{CreatedMs: 1735689600000, ID: 42}), int64(1735689600000), int64(42))
	f.Add("AQAAAZQiXyAAAAAAAAAAACo", int64(-1), int64(0))
	f.Add(strings.Repeat("_", 23), int64(1<<62), int64(1<<62))
	f.Fuzz(func(t *testing.T, s string, ms, id int64) {
		if c, ok := decodeCursor([]byte(s)); ok {
			if c.CreatedMs <= 0 || c.ID <= 0 {
				t.Fatalf("%q decodes to %+v", s, c)
			}
			if again := encodeCursor(c); again != s {
				t.Fatalf("%q decodes to %+v, which encodes as %q", s, c, again)
			}
		}
		c := store.OrderCursor{CreatedMs: ms, ID: id}
		got, ok := decodeCursor([]byte(encodeCursor(c)))
		if want := ms > 0 && id > 0; ok != want || ok && got != c {
			t.Fatalf("%+v round-trips to %+v, %v", c, got, ok)
		}
	})
}
