package edge

import (
	"context"
	"testing"
	"time"

	"seckill/engine"
	"seckill/internal/token"
	"seckill/sale"
)

const tokenPath = "/api/v1/flash-sale/token"

// reservedSale is activity 60: token required, users 5 and 6 reserved,
// SKU 6001, open an hour from saleStart.
var reservedSale = sale.Activity{ID: 60, Start: saleStart, End: saleStart.Add(time.Hour), State: sale.StateOnline,
	RequireToken: true, ReservedUsers: []int64{5, 6}, SKUs: []sale.SKU{{ID: 6001, Stock: 10, Price: 100, LimitPerUser: 1}}}

func newIssuer(t *testing.T) *token.Tokens {
	t.Helper()
	tk, err := token.New(token.Config{Keys: []token.Key{{ID: "k1", Secret: "0123456789abcdef-edge"}}, TTL: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func TestTokenIssuing(t *testing.T) {
	tk := newIssuer(t)
	shared := newEdge(t, withActivities(reservedSale))
	cases := []struct {
		name   string
		user   string // "-": none
		body   string
		at     time.Time
		opts   []envOption
		status int
		code   string
	}{
		{"a reserved user inside the window gets one", "5", `{"activityId":60,"skuId":6001}`, saleOpen, nil, 200, ""},
		{"the activity may be left to the sku", "6", `{"skuId":6001}`, saleOpen, nil, 200, ""},
		{"before the start is 425", "5", `{"activityId":60,"skuId":6001}`, saleStart.Add(-time.Second), nil, 425, "NOT_OPEN"},
		{"at the end is 410", "5", `{"activityId":60,"skuId":6001}`, saleStart.Add(time.Hour), nil, 410, "ENDED"},
		{"a user not on the reserved list is 403", "7", `{"activityId":60,"skuId":6001}`, saleOpen, nil, 403, "NOT_RESERVED"},
		{"a sale without tokens does not issue any", "5", `{"activityId":7,"skuId":1001}`, saleOpen, nil, 403, "TOKEN_NOT_REQUIRED"},
		{"an unknown sku is 404", "5", `{"skuId":9999}`, saleOpen, nil, 404, "UNKNOWN_SKU"},
		{"a sku of another activity is 404", "5", `{"activityId":60,"skuId":1001}`, saleOpen, nil, 404, "UNKNOWN_SKU"},
		{"no user is 401", "-", `{"activityId":60,"skuId":6001}`, saleOpen, nil, 401, "UNAUTHORIZED"},
		{"a non-numeric user is 400", "x7", `{"activityId":60,"skuId":6001}`, saleOpen, nil, 400, "BAD_REQUEST"},
		{"a malformed body is 400", "5", `{"activityId":60`, saleOpen, nil, 400, "BAD_REQUEST"},
		{"no issuer configured is 503", "5", `{"activityId":60,"skuId":6001}`, saleOpen, []envOption{withOptions()}, 503, "BUSY"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			opts := append([]envOption{withRedis(shared.redis)}, c.opts...)
			if c.opts == nil {
				opts = append(opts, withOptions(WithTokenIssuer(tk)))
			}
			e := newEdge(t, opts...)
			e.clock.set(c.at)
			user := c.user
			if user == "-" {
				user = ""
			}
			r := e.do("POST", tokenPath, user, c.body)
			if r.status != c.status || c.code != "" && r.code() != c.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.raw, c.status, c.code)
			}
			if r.header["Cache-Control"] != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", r.header["Cache-Control"])
			}
			if c.status != 200 {
				if msg, _ := r.body["message"].(string); msg == "" {
					t.Errorf("refusal without a message: %s", r.raw)
				}
				return
			}
			// {"token":"…","expireAt":"RFC3339"}, signed for this user and
			// SKU, expiring one TTL after server time.
			if len(r.body) != 2 {
				t.Errorf("body %s: want exactly token and expireAt", r.raw)
			}
			s, _ := r.body["token"].(string)
			claims, err := tk.Parse(s)
			if err != nil {
				t.Fatalf("token %q: %v", s, err)
			}
			if claims.Activity != 60 || claims.SKU != 6001 || claims.User != int64(mustAtoi(t, c.user)) {
				t.Fatalf("claims %+v", claims)
			}
			exp, err := time.Parse(time.RFC3339, r.body["expireAt"].(string))
			if err != nil || !exp.Equal(c.at.Add(time.Minute).Truncate(time.Second)) || !exp.Equal(claims.ExpireAt) {
				t.Fatalf("expireAt %v (%v), want %v", r.body["expireAt"], err, c.at.Add(time.Minute))
			}
			if e.eng.calls.Load() != 0 {
				t.Fatal("issuing a token called the engine")
			}
		})
	}
}

func TestNoTokenForASoldOutSKU(t *testing.T) {
	e := newEdge(t, withActivities(reservedSale), withOptions(WithTokenIssuer(newIssuer(t))))
	e.srv.HandleEvent(sale.Event{Kind: sale.EventSoldOut, Activity: 60, SKU: 6001})
	e.srv.flags.cache.Wait()
	mustStatus(t, e.do("POST", tokenPath, "5", `{"activityId":60,"skuId":6001}`), 410, "SOLD_OUT")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a number", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// deadlineVerifier accepts every token and records how long the edge gave
// Verify and Refund.
type deadlineVerifier struct{ verify, refund chan time.Duration }

func left(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return -1
	}
	return time.Until(d)
}

func (v deadlineVerifier) Verify(ctx context.Context, _ []byte, _ int64, _ *sale.Activity, _ int64, _ time.Time) error {
	v.verify <- left(ctx)
	return nil
}

func (v deadlineVerifier) Refund(ctx context.Context, _ []byte) { v.refund <- left(ctx) }

// Spending and refunding a token are bounded by edge.token_verify_timeout
// and edge.token_refund_timeout, not by a constant.
func TestTokenCallsAreBoundedByTheirConfiguredTimeouts(t *testing.T) {
	v := deadlineVerifier{verify: make(chan time.Duration, 1), refund: make(chan time.Duration, 1)}
	e := newEdge(t, withConfig(func(c *Config) {
		c.TokenVerifyTimeout, c.TokenRefundTimeout = 7*time.Second, 3*time.Second
	}), withOptions(WithTokenVerifier(v)))
	e.eng.answer(func(*engine.Request) (engine.Ticket, error) { return engine.Ticket{Remaining: -1}, engine.ErrBusy })
	if r := e.order("5", `{"skuId":2001,"token":"t"}`); r.status != 503 {
		t.Fatalf("got %d %s, want the engine's 503", r.status, r.raw)
	}
	for _, c := range []struct {
		what string
		got  chan time.Duration
		want time.Duration
	}{{"Verify", v.verify, 7 * time.Second}, {"Refund", v.refund, 3 * time.Second}} {
		select {
		case d := <-c.got:
			if d <= c.want-time.Second || d > c.want {
				t.Errorf("%s had %v left, want just under %v", c.what, d, c.want)
			}
		default:
			t.Errorf("%s was not called", c.what)
		}
	}
}
