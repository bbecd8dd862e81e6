package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"

	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
	"seckill/stock/stocktest"
	"seckill/store"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// rig: a real redis-server (append-only, so it can be killed and come back
// with its data), a preheated activity and an orders database.
type rig struct {
	redis *testenv.Redis
	stock *stock.Stock
	res   *results.Store
	st    store.Store
	act   sale.Activity
	seq   atomic.Int64
}

const timeout = time.Minute

func runTest(t *testing.T, fn func(t *testing.T, r *rig)) {
	t.Helper()
	stocktest.EachStore(t, func(t *testing.T, cfg store.Config) { fn(t, newRig(t, cfg)) })
}

func newRig(t *testing.T, scfg store.Config) *rig {
	t.Helper()
	l := stocktest.NewLedger(t, scfg, stocktest.Options{
		Redis:  []testenv.RedisOption{testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "always")},
		Shards: func(c *shard.Config) { c.Timeout = 500 * time.Millisecond },
	})
	r := &rig{redis: l.Redis, stock: l.Stock, res: l.Results, st: l.Store}
	now := time.Now()
	r.act = sale.Activity{ID: 3, Start: now.Add(-time.Hour), End: now.Add(time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 3001, Stock: 2, Price: 1250, LimitPerUser: 1}}}
	l.Sell(t, r.act)
	return r
}

// order makes user an order the way the engine and the consumer do:
// occupy, claim, save. ok false: the occupy script said no.
func (r *rig) order(t *testing.T, user int64) (store.Order, bool) {
	t.Helper()
	ctx := context.Background()
	rn := fmt.Sprintf("%d-%d-%d", r.act.ID, r.act.SKUs[0].ID, user*1000+r.seq.Add(1)) // README "Numbers"
	res, err := r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], user, rn, 1)
	for i := 0; err != nil && i < 30; i++ {
		// A connection dropped (the rig's 500ms Redis budget on a busy
		// machine, or one from before a restart): the script may have run.
		time.Sleep(100 * time.Millisecond)
		res, err = r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], user, rn, 1)
		if err == nil && res.Code == stock.CodeDuplicate && res.Holder == rn {
			res.Code = stock.CodeOK
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.Code != stock.CodeOK {
		return store.Order{}, false
	}
	m := sale.Message{RequestNo: rn, ActivityID: r.act.ID, SKUID: 3001, UserID: user, Quantity: 1, UnitPrice: 1250,
		AcceptedAt: time.Now().UnixMilli()}
	// Claim and the result write are idempotent: retried like the occupy
	// over a connection from before a Redis restart (EOF once per pipe).
	var claimed bool
	if err := retryRedis(func() (err error) { claimed, err = r.stock.Claim(ctx, &m); return err }); err != nil || !claimed {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	out, err := r.st.SaveBatch(ctx, []sale.Message{m})
	if err != nil || out[0].Kind != store.Created {
		t.Fatalf("save: %+v %v", out, err)
	}
	if err := retryRedis(func() error {
		return r.res.Write(ctx, results.Entry{RequestNo: rn, Activity: r.act.ID, SKU: 3001, Owner: user,
			State: sale.ResultSuccess, OrderNo: out[0].OrderNo})
	}); err != nil {
		t.Fatal(err)
	}
	o, err := r.st.Order(ctx, out[0].OrderNo)
	if err != nil {
		t.Fatal(err)
	}
	return o, true
}

// retryRedis runs an idempotent Redis step up to 30 times, 100ms apart,
// while it fails (a dropped connection).
func retryRedis(step func() error) error {
	err := step()
	for i := 0; err != nil && i < 30; i++ {
		time.Sleep(100 * time.Millisecond)
		err = step()
	}
	return err
}

func (r *rig) closer(t *testing.T, at time.Time) *Closer {
	return NewCloser(r.st, r.stock, r.res, timeout, zaptest.NewLogger(t), prometheus.NewRegistry(),
		WithClock(func() time.Time { return at }))
}

// books checks Redis and the database agree: Redis sold = live order
// units = snapshot sold, and nothing is held twice.
func (r *rig) books(t *testing.T) (remaining, ordered int64) {
	t.Helper()
	ctx := context.Background()
	n, err := r.stock.Counts(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	_, units, err := r.st.CountOrders(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := r.st.Snapshot(ctx, r.act.ID, 3001)
	if err != nil {
		t.Fatal(err)
	}
	if n.Sold != units || n.Holders != units || n.Claimed != units || n.Remaining+units != n.Initial ||
		sn.Sold != units || sn.Available != sn.Initial-units {
		t.Fatalf("books do not add up: redis %+v, %d ordered, snapshot %+v", n, units, sn)
	}
	return n.Remaining, units
}

// testKey is the provider's key in these tests.
const testKey = "test-payment-provider-key-0123456789abcdef"

func newSvc(t *testing.T, r *rig, log *zap.Logger, opts ...Option) *Service {
	t.Helper()
	if log == nil {
		log = zaptest.NewLogger(t)
	}
	return New(r.st, Config{ProviderKey: testKey}, timeout, log, opts...)
}

// signedCallback is the provider's callback for o under ref, signed with key.
func signedCallback(key string, o store.Order, amount sale.Cents, ref string) Callback {
	return Callback{OrderNo: o.OrderNo, Amount: amount, ProviderRef: ref, Signature: Sign(key, o.OrderNo, amount, ref)}
}

func TestAnOrderIsPaidOnlyThroughASignedCallback(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		core, logs := observer.New(zapcore.InfoLevel)
		svc := newSvc(t, r, zap.New(core))
		o, _ := r.order(t, 1)
		o2, _ := r.order(t, 2)
		status := func(o store.Order) string {
			t.Helper()
			got, err := r.st.Order(ctx, o.OrderNo)
			if err != nil {
				t.Fatal(err)
			}
			return got.Status
		}
		// The buyer's route starts the payment and reports it; it pays nothing.
		for range 2 {
			if in, err := svc.Intent(ctx, o.OrderNo, 1); err != nil || in.State != StateAwaiting || in.Amount != 1250 {
				t.Fatalf("intent: %+v %v", in, err)
			}
		}
		if _, err := svc.Intent(ctx, o.OrderNo, 2); !errors.Is(err, ErrNotFound) {
			t.Errorf("another buyer's intent: %v", err)
		}
		if st := status(o); st != store.OrderPendingPayment {
			t.Fatalf("the buyer's word paid the order: %s", st)
		}
		refused := []struct {
			name string
			cb   Callback
			want error
		}{
			{"a callback signed with another key", signedCallback("someone-else-key-0123456789abcdefgh", o, 1250, "ref-1"), ErrSignature},
			{"a callback without a signature", Callback{OrderNo: o.OrderNo, Amount: 1250, ProviderRef: "ref-1"}, ErrSignature},
			{"a signed callback whose amount was changed", func() Callback {
				cb := signedCallback(testKey, o, 1250, "ref-1")
				cb.Amount = 1
				return cb
			}(), ErrSignature},
			{"a signed callback for another amount", signedCallback(testKey, o, 1, "ref-1"), ErrAmount},
			{"a signed callback for an unknown order", signedCallback(testKey, store.Order{OrderNo: "Onope"}, 1250, "ref-1"), ErrNotFound},
		}
		for _, c := range refused {
			if _, err := svc.Confirm(ctx, c.cb); !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
		if st := status(o); st != store.OrderPendingPayment {
			t.Fatalf("a refused callback paid the order: %s", st)
		}
		// The provider's signed word pays it; the same callback again is a
		// no-op; the reference cannot pay another order.
		for range 2 {
			if p, err := svc.Confirm(ctx, signedCallback(testKey, o, 1250, "ref-1")); err != nil || p.Status != store.OrderPaid {
				t.Fatalf("confirm: %+v %v", p, err)
			}
		}
		if _, err := svc.Confirm(ctx, signedCallback(testKey, o2, 1250, "ref-1")); !errors.Is(err, ErrRefReused) {
			t.Errorf("the reference for another order: %v, want ErrRefReused", err)
		}
		if _, err := svc.Confirm(ctx, signedCallback(testKey, o, 1250, "ref-2")); !errors.Is(err, ErrAlreadyPaid) {
			t.Errorf("a second reference for a paid order: %v, want ErrAlreadyPaid", err)
		}
		if st := status(o2); st != store.OrderPendingPayment {
			t.Fatalf("a reused reference paid another order: %s", st)
		}
		// Too late, then closed.
		late := newSvc(t, r, nil, WithClock(func() time.Time { return time.Now().Add(2 * timeout) }))
		if _, err := late.Confirm(ctx, signedCallback(testKey, o2, 1250, "ref-3")); !errors.Is(err, ErrExpired) {
			t.Errorf("pay past the deadline: %v", err)
		}
		if n, err := r.closer(t, time.Now().Add(2*timeout)).Scan(ctx); err != nil || n != 1 {
			t.Fatalf("close: %d %v", n, err)
		}
		if _, err := svc.Confirm(ctx, signedCallback(testKey, o2, 1250, "ref-3")); !errors.Is(err, ErrClosed) {
			t.Errorf("pay a closed order: %v", err)
		}
		if in, err := svc.Intent(ctx, o2.OrderNo, 2); err != nil || in.State != StateClosed {
			t.Errorf("intent of a closed order: %+v %v", in, err)
		}
		// Without a provider key nothing is paid (fail closed).
		nokey := New(r.st, Config{}, timeout, zaptest.NewLogger(t))
		o3, _ := r.order(t, 3)
		if _, err := nokey.Confirm(ctx, signedCallback("", o3, 1250, "ref-4")); !errors.Is(err, ErrSignature) {
			t.Errorf("no key configured: %v, want ErrSignature", err)
		}
		r.books(t)
		// The audit log: every refusal at warn, with its reason and the
		// callback's fields; the replay too.
		for _, reason := range []string{"signature", "amount", "not_found", "reference_reused", "already_paid", "closed"} {
			if logs.FilterMessage("payment callback refused").FilterField(zap.String("reason", reason)).Len() == 0 {
				t.Errorf("no audit line for a refusal of reason %s", reason)
			}
		}
		if n := logs.FilterMessage("payment callback replayed: already recorded, nothing changed").
			FilterField(zap.String("providerRef", "ref-1")).Len(); n != 1 {
			t.Errorf("%d audit lines for the replay, want 1", n)
		}
		if n := logs.FilterMessage("payment confirmed: order paid").Len(); n != 1 {
			t.Errorf("%d lines for the one payment, want 1", n)
		}
	})
}

func TestPaymentRoutesAnswer(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		o, _ := r.order(t, 7)
		svc := newSvc(t, r, nil)
		pay, callback := Handler(svc, 0), CallbackHandler(svc, 0)
		decode := func(c *fasthttp.RequestCtx) (int, Answer) {
			var a Answer
			if err := json.Unmarshal(c.Response.Body(), &a); err != nil {
				t.Fatalf("body %q: %v", c.Response.Body(), err)
			}
			return c.Response.StatusCode(), a
		}
		intent := func(user, orderNo string) (int, Answer) {
			var c fasthttp.RequestCtx
			c.Request.Header.SetMethod("POST")
			if user != "" {
				c.Request.Header.Set("X-User-Id", user)
			}
			c.SetUserValue("orderNo", orderNo)
			pay(&c)
			return decode(&c)
		}
		confirm := func(contentType, body string) (int, Answer) {
			var c fasthttp.RequestCtx
			c.Request.Header.SetMethod("POST")
			c.Request.Header.SetContentType(contentType)
			c.Request.SetBodyString(body)
			callback(&c)
			return decode(&c)
		}
		body := func(amount int64, ref, sig string) string {
			b, _ := json.Marshal(map[string]any{"orderNo": o.OrderNo, "amountCents": amount, "providerRef": ref, "signature": sig})
			return string(b)
		}
		good := body(1250, "ref-7", Sign(testKey, o.OrderNo, 1250, "ref-7"))
		for _, tc := range []struct {
			name   string
			call   func() (int, Answer)
			status int
			code   string
		}{
			{"no user is unauthorized", func() (int, Answer) { return intent("", o.OrderNo) }, 401, "UNAUTHORIZED"},
			{"a malformed user is a bad request", func() (int, Answer) { return intent("x7", o.OrderNo) }, 400, "BAD_REQUEST"},
			{"another buyer's order is not found", func() (int, Answer) { return intent("8", o.OrderNo) }, 404, "NOT_FOUND"},
			{"an unknown order is not found", func() (int, Answer) { return intent("7", "Onope") }, 404, "NOT_FOUND"},
			{"the buyer starts the payment: an intent, not a payment", func() (int, Answer) { return intent("7", o.OrderNo) }, 200, "PAYMENT_PENDING"},
			{"a form-encoded callback is refused", func() (int, Answer) { return confirm("application/x-www-form-urlencoded", good) }, 415, "UNSUPPORTED_MEDIA_TYPE"},
			{"a callback with an unknown field is refused", func() (int, Answer) {
				return confirm("application/json", good[:len(good)-1]+`,"paid":true}`)
			}, 400, "BAD_REQUEST"},
			{"a forged callback is refused", func() (int, Answer) {
				return confirm("application/json", body(1250, "ref-7", Sign("forged-key-0123456789abcdefghijkl", o.OrderNo, 1250, "ref-7")))
			}, 401, "BAD_SIGNATURE"},
			{"a wrong-amount callback is refused", func() (int, Answer) {
				return confirm("application/json", body(1, "ref-7", Sign(testKey, o.OrderNo, 1, "ref-7")))
			}, 409, "AMOUNT_MISMATCH"},
			{"the provider's callback pays", func() (int, Answer) { return confirm("application/json; charset=utf-8", good) }, 200, "PAID"},
			{"the same callback again answers paid", func() (int, Answer) { return confirm("application/json", good) }, 200, "PAID"},
			{"the buyer reads the paid state", func() (int, Answer) { return intent("7", o.OrderNo) }, 200, "PAID"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				status, a := tc.call()
				if status != tc.status || a.Code != tc.code {
					t.Errorf("%d %+v, want %d %s", status, a, tc.status, tc.code)
				}
				if a.Code == "PAYMENT_PENDING" && (a.State != StateAwaiting || a.Amount != "12.50" || a.AmountCents != 1250 || a.OrderNo != o.OrderNo || a.ExpireAt == "") {
					t.Errorf("intent answer %+v", a)
				}
				if a.Code == "PAID" && (a.State != StatePaid || a.Amount != "12.50" || a.OrderNo != o.OrderNo) {
					t.Errorf("paid answer %+v", a)
				}
			})
		}
	})
}

// TestClosedOrdersUnitSellsAgain: an unpaid order is closed, its unit is
// back in the snapshot and in Redis once, the buyer reads FAIL CLOSED, and
// the unit is bought again — by its first buyer and by another.
func TestClosedOrdersUnitSellsAgain(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		a, _ := r.order(t, 1)
		b, _ := r.order(t, 2)
		if _, ok := r.order(t, 3); ok {
			t.Fatal("a third unit was sold out of two")
		}
		if err := newSvc(t, r, nil).PayNow(ctx, b); err != nil {
			t.Fatal(err)
		}
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		if n, err := c.Scan(ctx); err != nil || n != 1 {
			t.Fatalf("scan: %d %v", n, err)
		}
		if n, err := c.Scan(ctx); err != nil || n != 0 {
			t.Fatalf("second scan: %d %v", n, err)
		}
		if rem, ordered := r.books(t); rem != 1 || ordered != 1 {
			t.Fatalf("after the close: %d remaining, %d ordered", rem, ordered)
		}
		res, err := r.res.Read(ctx, a.UserID, a.RequestNo)
		if err != nil || res.State != sale.ResultFail || res.Code != sale.FailClosed || res.OrderNo != a.OrderNo {
			t.Errorf("closed buyer's result %+v, %v", res, err)
		}
		if again, ok := r.order(t, 1); !ok || again.OrderNo == a.OrderNo {
			t.Fatalf("the first buyer could not buy the freed unit again: %+v", again)
		}
		if _, ok := r.order(t, 3); ok {
			t.Fatal("sold more than the stock")
		}
		// Close that one too: another buyer takes the unit.
		if n, err := r.closer(t, time.Now().Add(timeout+time.Second)).Scan(ctx); err != nil || n != 1 {
			t.Fatalf("second close: %d %v", n, err)
		}
		if _, ok := r.order(t, 3); !ok {
			t.Fatal("another buyer could not buy the freed unit")
		}
		r.books(t)
		evs, _ := r.st.RequestEvents(ctx, a.RequestNo)
		var steps []string
		for _, e := range evs {
			steps = append(steps, e.Status)
		}
		if fmt.Sprint(steps[len(steps)-2:]) != fmt.Sprint([]string{store.EventOrderClosed, store.EventStockReleased}) {
			t.Errorf("history of the closed ticket: %v", steps)
		}
	})
}

// TestRedisDownBetweenCloseAndReleaseRetriesOnce: the database half of a
// close commits while Redis is down; the marker keeps the release pending
// until Redis is back, and the unit comes back exactly once.
func TestRedisDownBetweenCloseAndReleaseRetriesOnce(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		r.order(t, 1)
		r.order(t, 2)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		r.redis.Stop()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := c.Scan(sctx)
		cancel()
		if err != nil || n != 2 {
			t.Fatalf("scan with redis down: %d %v", n, err)
		}
		if rel, _ := r.st.PendingReleases(ctx, 10); len(rel) != 2 {
			t.Fatalf("%d releases pending, want 2", len(rel))
		}
		if err := r.redis.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "no release pending once redis is back", 10*time.Second, func() bool {
			if _, err := c.Scan(ctx); err != nil {
				return false
			}
			rel, _ := r.st.PendingReleases(ctx, 10)
			return len(rel) == 0
		})
		c.Scan(ctx)
		if rem, ordered := r.books(t); rem != 2 || ordered != 0 {
			t.Fatalf("after the retried releases: %d remaining, %d ordered", rem, ordered)
		}
	})
}

// TestPayAndCloseRaceNeverBoth races the provider's payment against the closer
// for many orders: each ends paid or closed, never both, and the books add
// up after every round.
func TestPayAndCloseRaceNeverBoth(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		svc := newSvc(t, r, nil)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		if err := r.st.Restock(ctx, r.act.ID, 3001, 30); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.stock.Restock(ctx, r.act.ID, 3001, 30); err != nil {
			t.Fatal(err)
		}
		paid, closed := 0, 0
		for i := range 30 {
			user := int64(100 + i)
			o, ok := r.order(t, user)
			if !ok {
				t.Fatalf("round %d: no unit to buy", i)
			}
			var (
				wg   sync.WaitGroup
				perr error
				n    int
				cerr error
			)
			wg.Go(func() { _, perr = svc.Confirm(ctx, signedCallback(testKey, o, o.Amount, fmt.Sprintf("ref-%d", i))) })
			wg.Go(func() { n, cerr = c.Scan(ctx) })
			wg.Wait()
			if cerr != nil || (perr != nil && !errors.Is(perr, ErrClosed)) {
				t.Fatalf("round %d: pay %v, close %v", i, perr, cerr)
			}
			final, _ := r.st.Order(ctx, o.OrderNo)
			switch {
			case perr == nil && n == 0 && final.Status == store.OrderPaid:
				paid++
			case errors.Is(perr, ErrClosed) && n == 1 && final.Status == store.OrderClosed:
				closed++
			default:
				t.Fatalf("round %d: pay %v, closed %d, order %s", i, perr, n, final.Status)
			}
			r.books(t)
		}
		t.Logf("%d paid, %d closed", paid, closed)
	})
}

// PayNow pays o through a callback the provider signed with testKey (a
// test shorthand).
func (s *Service) PayNow(ctx context.Context, o store.Order) error {
	_, err := s.Confirm(ctx, signedCallback(testKey, o, o.Amount, "ref-"+o.OrderNo))
	return err
}

// TestClosedBuyerMayNotBuyAgainWhereTheActivitySaysSo: an activity with
// rebuyAfterClose false. The close is still exactly once — database first,
// marker, Redis second, retried while Redis is down — the unit comes back
// once and sells to another buyer, and the closed order's buyer is refused
// as a duplicate naming the closed ticket.
func TestClosedBuyerMayNotBuyAgainWhereTheActivitySaysSo(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		no := false
		r.act.RebuyAfterClose = &no
		if err := r.stock.Preheat(ctx, r.act); err != nil {
			t.Fatal(err)
		}
		a, _ := r.order(t, 1)
		r.order(t, 2)
		c := r.closer(t, time.Now().Add(timeout+time.Second))
		r.redis.Stop()
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := c.Scan(sctx)
		cancel()
		if err != nil || n != 2 {
			t.Fatalf("scan with redis down: %d %v", n, err)
		}
		if err := r.redis.Start(); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "no release pending once redis is back", 10*time.Second, func() bool {
			if _, err := c.Scan(ctx); err != nil {
				return false
			}
			rel, _ := r.st.PendingReleases(ctx, 10)
			return len(rel) == 0
		})
		c.Scan(ctx)
		if rem, ordered := r.books(t); rem != 2 || ordered != 0 {
			t.Fatalf("after the retried releases: %d remaining, %d ordered", rem, ordered)
		}
		res, err := r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], 1, "again", 1)
		for i := 0; err != nil && i < 50; i++ { // a connection from before the restart
			time.Sleep(100 * time.Millisecond)
			res, err = r.stock.Occupy(ctx, &r.act, &r.act.SKUs[0], 1, "again", 1)
		}
		if err != nil || res.Code != stock.CodeDuplicate || res.Holder != a.RequestNo {
			t.Fatalf("the closed buyer again: %+v %v, want DUPLICATE naming %s", res, err, a.RequestNo)
		}
		if _, ok := r.order(t, 1); ok {
			t.Fatal("the closed buyer bought again")
		}
		if _, ok := r.order(t, 3); !ok {
			t.Fatal("another buyer could not buy the freed unit")
		}
		if _, ok := r.order(t, 4); !ok {
			t.Fatal("another buyer could not buy the second freed unit")
		}
		if rem, ordered := r.books(t); rem != 0 || ordered != 2 {
			t.Fatalf("at the end: %d remaining, %d ordered", rem, ordered)
		}
	})
}
