package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// runner opens stores of one implementation on one fresh database.
type runner struct {
	cfg Config
}

// open opens a store on the runner's database, closed when the test ends.
func (r runner) open(t *testing.T, opts ...Option) Store {
	t.Helper()
	s, err := Open(r.cfg, opts...)
	if err != nil {
		t.Fatalf("open %s: %v", r.cfg.Driver, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runTest runs fn against every implementation, each on a fresh database
// (like uber-go/ratelimit's runTest over its limiters).
func runTest(t *testing.T, fn func(t *testing.T, r runner)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.DSN = filepath.Join(t.TempDir(), "seckill.db")
		fn(t, runner{cfg})
	})
	t.Run("mysql", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Driver, cfg.DSN = "mysql", testenv.MySQL(t)
		fn(t, runner{cfg})
	})
}

func activity(id int64, skus ...sale.SKU) sale.Activity {
	now := time.Now()
	return sale.Activity{ID: id, Start: now.Add(-time.Hour), End: now.Add(time.Hour), SKUs: skus}
}

func msg(req string, act, sku, user int64) sale.Message {
	return sale.Message{RequestNo: req, ActivityID: act, SKUID: sku, UserID: user, Quantity: 1,
		UnitPrice: 990, AcceptedAt: time.Now().UnixMilli(), TraceID: "t-" + req}
}

func put(t *testing.T, s Store, a sale.Activity) {
	t.Helper()
	if err := s.PutActivity(context.Background(), a); err != nil {
		t.Fatalf("PutActivity: %v", err)
	}
}

func save(t *testing.T, s Store, msgs ...sale.Message) []Outcome {
	t.Helper()
	out, err := s.SaveBatch(context.Background(), msgs)
	if err != nil {
		t.Fatalf("SaveBatch: %v", err)
	}
	if len(out) != len(msgs) {
		t.Fatalf("SaveBatch gave %d outcomes for %d messages", len(out), len(msgs))
	}
	return out
}

func snapshot(t *testing.T, s Store, act, sku int64) Snapshot {
	t.Helper()
	sn, err := s.Snapshot(context.Background(), act, sku)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return sn
}

func wantOutcomes(t *testing.T, got []Outcome, want ...Outcome) {
	t.Helper()
	for i := range want {
		g := got[i]
		g.OrderStatus = "" // checked where it matters
		if g != want[i] {
			t.Errorf("outcome %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func wantStock(t *testing.T, s Store, act, sku, initial, available int64) {
	t.Helper()
	sn := snapshot(t, s, act, sku)
	if sn.Initial != initial || sn.Available != available || sn.Sold != initial-available {
		t.Errorf("snapshot = %+v, want initial %d available %d sold %d", sn, initial, available, initial-available)
	}
	_, units, err := s.CountOrders(context.Background(), act, sku)
	if err != nil {
		t.Fatal(err)
	}
	if units != initial-available {
		t.Errorf("orders hold %d units, snapshot sold %d", units, initial-available)
	}
}

func TestMigratingTwiceIsFine(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s1 := r.open(t)
		put(t, s1, activity(1, sale.SKU{ID: 10, Stock: 5}))
		s1.Close()
		s2 := r.open(t)
		if err := s2.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantStock(t, s2, 1, 10, 5, 5)
	})
}

func TestPutActivityTwiceKeepsTheSnapshot(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 101))
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 50}, sale.SKU{ID: 11, Stock: 7}))
		wantStock(t, s, 1, 10, 5, 3)
		wantStock(t, s, 1, 11, 7, 7)
	})
}

func TestSaveBatchCreatesOrders(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 10}, sale.SKU{ID: 11, Stock: 10}))
		m := msg("r1", 1, 10, 100)
		m.Quantity = 2
		out := save(t, s, m, msg("r2", 1, 11, 100), msg("r3", 1, 10, 101))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r1", Kind: Created, OrderNo: "Or1"},
			Outcome{RequestNo: "r2", Kind: Created, OrderNo: "Or2"},
			Outcome{RequestNo: "r3", Kind: Created, OrderNo: "Or3"})
		if out[0].OrderStatus != OrderPendingPayment {
			t.Errorf("created order status %q", out[0].OrderStatus)
		}
		wantStock(t, s, 1, 10, 10, 7)
		wantStock(t, s, 1, 11, 10, 9)

		o, err := s.Order(ctx, "Or1")
		if err != nil {
			t.Fatal(err)
		}
		if o.RequestNo != "r1" || o.UserID != 100 || o.Quantity != 2 || o.UnitPrice != 990 ||
			o.Amount != 1980 || o.Status != OrderPendingPayment || o.TraceID != "t-r1" || o.Created.IsZero() {
			t.Errorf("order = %+v", o)
		}
		if o2, err := s.OrderByRequest(ctx, "r1"); err != nil || o2 != o {
			t.Errorf("OrderByRequest = %+v, %v; want %+v", o2, err, o)
		}
		if _, err := s.Order(ctx, "Onone"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Order of a missing order: %v, want ErrNotFound", err)
		}
		e, err := s.RequestLog(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != StatusOrderCreated || e.OrderNo != "Or1" || e.TraceID != "t-r1" || e.Quantity != 2 {
			t.Errorf("request log = %+v", e)
		}
	})
}

func TestRedeliveryChangesNothing(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 10}))
		save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 101))
		before := snapshot(t, s, 1, 10)
		out := save(t, s, msg("r2", 1, 10, 101), msg("r1", 1, 10, 100))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r2", Kind: Existing, OrderNo: "Or2"},
			Outcome{RequestNo: "r1", Kind: Existing, OrderNo: "Or1"})
		if after := snapshot(t, s, 1, 10); after != before {
			t.Errorf("snapshot moved on redelivery: %+v -> %+v", before, after)
		}
		if n, _, _ := s.CountOrders(context.Background(), 1, 10); n != 2 {
			t.Errorf("%d orders, want 2", n)
		}
	})
}

// A batch of distinct buyers is saved first without the lookup of their
// orders (SaveBatch); whatever that lookup would have decided must still
// be decided: a ticket with an order stays Existing on a sold-out SKU, a
// buyer's second ticket stays Duplicate, a closed order's ticket stays
// Existing beside new orders.
func TestBatchOfDistinctBuyersStillFindsTheirOrders(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 2}, sale.SKU{ID: 11, Stock: 5}))
		save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 101))
		wantStock(t, s, 1, 10, 2, 0)

		// Sold out: the redelivered ticket and the buyer's other ticket
		// are not sold out, they have an order.
		out := save(t, s, msg("r1", 1, 10, 100), msg("r3", 1, 10, 101), msg("r4", 1, 10, 102))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r1", Kind: Existing, OrderNo: "Or1"},
			Outcome{RequestNo: "r3", Kind: Duplicate, OrderNo: "Or2"},
			Outcome{RequestNo: "r4", Kind: SoldOut})
		for req, want := range map[string]string{"r1": StatusOrderCreated, "r3": StatusFailed} {
			if e, err := s.RequestLog(ctx, req); err != nil || e.Status != want {
				t.Errorf("request log of %s = %+v, %v; want %s", req, e, err, want)
			}
		}

		// Stock left: one ticket with an order among new ones rolls the
		// first attempt back; nothing of it stays.
		save(t, s, msg("r5", 1, 11, 100))
		out = save(t, s, msg("r6", 1, 11, 200), msg("r5", 1, 11, 100), msg("r7", 1, 11, 201))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r6", Kind: Created, OrderNo: "Or6"},
			Outcome{RequestNo: "r5", Kind: Existing, OrderNo: "Or5"},
			Outcome{RequestNo: "r7", Kind: Created, OrderNo: "Or7"})
		wantStock(t, s, 1, 11, 5, 2)

		// A closed order: its ticket again is Existing (CLOSED), while
		// the buyer's new ticket makes a new order.
		if _, closed, err := s.CloseOrder(ctx, "Or5", time.Now().Add(time.Hour)); err != nil || !closed {
			t.Fatalf("close Or5: closed=%v, %v", closed, err)
		}
		wantStock(t, s, 1, 11, 5, 3)
		out = save(t, s, msg("r8", 1, 11, 100), msg("r9", 1, 11, 202))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r8", Kind: Created, OrderNo: "Or8"},
			Outcome{RequestNo: "r9", Kind: Created, OrderNo: "Or9"})
		out = save(t, s, msg("r5", 1, 11, 100), msg("r10", 1, 11, 203))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r5", Kind: Existing, OrderNo: "Or5"},
			Outcome{RequestNo: "r10", Kind: Created, OrderNo: "Or10"})
		if out[0].OrderStatus != OrderClosed {
			t.Errorf("the closed order's ticket again: %+v, want its order CLOSED", out[0])
		}
		wantStock(t, s, 1, 11, 5, 0)
		if n, _, _ := s.CountOrders(ctx, 1, 11); n != 5 {
			t.Errorf("%d live orders of SKU 11, want 5", n)
		}
	})
}

func TestTicketsOfOneUserMakeOneOrder(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 10}))
		save(t, s, msg("r1", 1, 10, 100))

		out := save(t, s,
			msg("r2", 1, 10, 100), // another ticket, order exists
			msg("r3", 1, 10, 101), // new
			msg("r4", 1, 10, 101), // same batch, same user
			msg("r3", 1, 10, 101), // same ticket twice in one batch
		)
		wantOutcomes(t, out,
			Outcome{RequestNo: "r2", Kind: Duplicate, OrderNo: "Or1"},
			Outcome{RequestNo: "r3", Kind: Created, OrderNo: "Or3"},
			Outcome{RequestNo: "r4", Kind: Duplicate, OrderNo: "Or3"},
			Outcome{RequestNo: "r3", Kind: Created, OrderNo: "Or3"})
		wantStock(t, s, 1, 10, 10, 8)
		for req, order := range map[string]string{"r2": "Or1", "r4": "Or3"} {
			e, err := s.RequestLog(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if e.Status != StatusFailed || e.OrderNo != order || e.Remark == "" {
				t.Errorf("request log of %s = %+v", req, e)
			}
		}
		if _, err := s.OrderByRequest(ctx, "r4"); !errors.Is(err, ErrNotFound) {
			t.Errorf("order for duplicate ticket r4: %v", err)
		}
	})
}

func TestSnapshotGuardSellsOnlyWhatItHas(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 3}))
		var msgs []sale.Message
		for i := range 5 {
			msgs = append(msgs, msg("r"+strconv.Itoa(i), 1, 10, int64(100+i)))
		}
		out := save(t, s, msgs...)
		kinds := map[OutcomeKind]int{}
		for i, o := range out {
			kinds[o.Kind]++
			if want := Created; i >= 3 {
				want = SoldOut
				if o.Kind != want || o.OrderNo != "" {
					t.Errorf("outcome %d = %+v, want SoldOut", i, o)
				}
			} else if o.Kind != want {
				t.Errorf("outcome %d = %+v, want Created", i, o)
			}
		}
		wantStock(t, s, 1, 10, 3, 0)
		e, err := s.RequestLog(context.Background(), "r4")
		if err != nil || e.Status != StatusFailed {
			t.Errorf("request log of sold-out r4 = %+v, %v", e, err)
		}
		// Stock 0 left: a smaller quantity later does not fit either.
		if out := save(t, s, msg("r9", 1, 10, 200)); out[0].Kind != SoldOut {
			t.Errorf("after sell-out: %+v", out[0])
		}
	})
}

func TestQuantityThatDoesNotFitLetsSmallerOnesThrough(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 2, LimitPerUser: 3}))
		big := msg("r1", 1, 10, 100)
		big.Quantity = 3
		out := save(t, s, big, msg("r2", 1, 10, 101), msg("r3", 1, 10, 102), msg("r4", 1, 10, 103))
		wantOutcomes(t, out,
			Outcome{RequestNo: "r1", Kind: SoldOut},
			Outcome{RequestNo: "r2", Kind: Created, OrderNo: "Or2"},
			Outcome{RequestNo: "r3", Kind: Created, OrderNo: "Or3"},
			Outcome{RequestNo: "r4", Kind: SoldOut})
		wantStock(t, s, 1, 10, 2, 0)
	})
}

func TestMissingSnapshotFailsTheBatch(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 3}))
		_, err := s.SaveBatch(context.Background(), []sale.Message{msg("r1", 1, 10, 100), msg("r2", 1, 99, 100)})
		if !errors.Is(err, ErrNoSnapshot) {
			t.Fatalf("SaveBatch = %v, want ErrNoSnapshot", err)
		}
		wantStock(t, s, 1, 10, 3, 3)
	})
}

func TestFailedTransactionRollsBack(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		var fail atomic.Bool
		fail.Store(true)
		boom := errors.New("injected")
		s := r.open(t, WithBeforeCommit(func(context.Context, []sale.Message) error {
			if fail.CompareAndSwap(true, false) {
				return boom
			}
			return nil
		}))
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 3}))
		batch := []sale.Message{msg("r1", 1, 10, 100), msg("r2", 1, 10, 101)}
		if _, err := s.SaveBatch(ctx, batch); !errors.Is(err, boom) {
			t.Fatalf("SaveBatch = %v, want the injected error", err)
		}
		wantStock(t, s, 1, 10, 3, 3)
		if _, err := s.RequestLog(ctx, "r1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("request log survived the rollback: %v", err)
		}
		out := save(t, s, batch...)
		wantOutcomes(t, out,
			Outcome{RequestNo: "r1", Kind: Created, OrderNo: "Or1"},
			Outcome{RequestNo: "r2", Kind: Created, OrderNo: "Or2"})
		wantStock(t, s, 1, 10, 3, 1)
	})
}

func TestRequestLogUpserts(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s := r.open(t)
		e := LogEntry{RequestNo: "r1", ActivityID: 1, SKUID: 10, UserID: 100, Quantity: 1,
			Status: StatusMQQueued, TraceID: "tr"}
		if err := s.LogRequest(ctx, e); err != nil {
			t.Fatal(err)
		}
		e.Status, e.OrderNo, e.Remark = StatusSuccess, "Or1", string(make([]byte, 400))
		if err := s.LogRequest(ctx, e); err != nil {
			t.Fatal(err)
		}
		got, err := s.RequestLog(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusSuccess || got.OrderNo != "Or1" || got.TraceID != "tr" || len(got.Remark) != maxRemark ||
			got.UserID != 100 || got.Created.IsZero() || got.Updated.Before(got.Created) {
			t.Errorf("request log = %+v", got)
		}
		if _, err := s.RequestLog(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing entry: %v", err)
		}
	})
}

func TestConcurrentBatchesNeverOversell(t *testing.T) {
	// Each SKU is oversubscribed six times over (60 distinct buyers for 10
	// units) and every buyer sends three tickets per SKU from different
	// workers, so concurrent batches race both on the snapshot's stock and
	// on one buyer's order. The expectations are counted here, from the
	// outcomes and the orders, not read from the store's own totals.
	runTest(t, func(t *testing.T, r runner) {
		const (
			stock   = 10
			users   = 60 // distinct buyers per SKU
			workers = 6
			repeats = 3 // tickets per buyer per SKU, each from another worker
			size    = 10
		)
		skus := []int64{10, 11}
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: stock}, sale.SKU{ID: 11, Stock: stock}))
		type ticket struct {
			sku, user int64
			out       Outcome
		}
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			tickets   []ticket
			rollbacks atomic.Int64
		)
		for w := range workers {
			// Worker w sends buyers w*10 … w*10+29 (mod 60) on both SKUs:
			// every buyer is in exactly three workers' share. Each share
			// goes in buyer order, so three workers open with buyers 0-4:
			// the same buyers race from the first batches on.
			share := make([]int64, 0, users*repeats/workers)
			for k := range users * repeats / workers {
				share = append(share, int64((w*size+k)%users))
			}
			slices.Sort(share)
			var mine []sale.Message
			for _, u := range share {
				for _, sku := range skus {
					mine = append(mine, msg(fmt.Sprintf("w%d-s%d-u%d", w, sku, u), 1, sku, u))
				}
			}
			wg.Go(func() {
				for len(mine) > 0 {
					n := min(size, len(mine))
					msgs := mine[:n]
					mine = mine[n:]
					var (
						out []Outcome
						err error
					)
					for range 50 { // the consumer retries a rolled-back batch the same way
						if out, err = s.SaveBatch(context.Background(), msgs); err == nil {
							break
						}
						rollbacks.Add(1)
					}
					if err != nil {
						t.Errorf("SaveBatch kept failing: %v", err)
						return
					}
					mu.Lock()
					for i, o := range out {
						tickets = append(tickets, ticket{msgs[i].SKUID, msgs[i].UserID, o})
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		t.Logf("%d batches rolled back and retried", rollbacks.Load())
		if want := len(skus) * users * repeats; len(tickets) != want {
			t.Fatalf("%d outcomes, want %d", len(tickets), want)
		}
		for _, sku := range skus {
			// One order per buyer: at most one Created ticket each, and
			// every other ticket of a buyer with an order is a Duplicate
			// naming it; a buyer without one was refused SoldOut.
			orderOf := map[int64]string{}
			kinds := map[OutcomeKind]int{}
			for _, tk := range tickets {
				if tk.sku != sku {
					continue
				}
				kinds[tk.out.Kind]++
				if tk.out.Kind == Created {
					if prev, ok := orderOf[tk.user]; ok {
						t.Errorf("sku %d: user %d got two orders, %s and %s", sku, tk.user, prev, tk.out.OrderNo)
					}
					orderOf[tk.user] = tk.out.OrderNo
				}
			}
			if kinds[Created] != stock || len(orderOf) != stock {
				t.Errorf("sku %d: %d tickets Created for %d users, want exactly %d (outcomes %v)",
					sku, kinds[Created], len(orderOf), stock, kinds)
			}
			for _, tk := range tickets {
				if tk.sku != sku || tk.out.Kind == Created {
					continue
				}
				order, has := orderOf[tk.user]
				switch {
				case has && (tk.out.Kind != Duplicate || tk.out.OrderNo != order):
					t.Errorf("sku %d: user %d holds order %s, another ticket got %+v", sku, tk.user, order, tk.out)
				case !has && tk.out.Kind != SoldOut:
					t.Errorf("sku %d: user %d without an order got %+v, want SoldOut", sku, tk.user, tk.out)
				}
			}
			// The database agrees: the snapshot is empty and the orders are
			// exactly the Created tickets, one per user.
			sn, orders, err := s.Ledger(context.Background(), 1, sku)
			if err != nil {
				t.Fatal(err)
			}
			if sn.Initial != stock || sn.Available != 0 || sn.Sold != stock {
				t.Errorf("sku %d: snapshot %+v, want initial %d, available 0, sold %d", sku, sn, stock, stock)
			}
			if len(orders) != stock {
				t.Errorf("sku %d: %d orders in the database, want %d", sku, len(orders), stock)
			}
			seen := map[int64]bool{}
			for _, o := range orders {
				if seen[o.UserID] {
					t.Errorf("sku %d: user %d has two orders in the database", sku, o.UserID)
				}
				seen[o.UserID] = true
				if _, ok := orderOf[o.UserID]; !ok || o.Quantity != 1 || !o.Live() {
					t.Errorf("sku %d: order %+v is not one of the Created tickets", sku, o)
				}
			}
		}
	})
}

func TestRequestNoReusedOnAnotherSKUFailsTheBatch(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 3}, sale.SKU{ID: 11, Stock: 3}))
		save(t, s, msg("r1", 1, 10, 100))
		_, err := s.SaveBatch(context.Background(), []sale.Message{msg("r2", 1, 11, 101), msg("r1", 1, 11, 100)})
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("SaveBatch = %v, want ErrConflict", err)
		}
		wantStock(t, s, 1, 11, 3, 3)
	})
}

func TestRestockRaisesInitialAndAvailable(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 2}))
		save(t, s, msg("r1", 1, 10, 100), msg("r2", 1, 10, 101))
		wantStock(t, s, 1, 10, 2, 0)
		if err := s.Restock(context.Background(), 1, 10, 3); err != nil {
			t.Fatal(err)
		}
		wantStock(t, s, 1, 10, 5, 3)
		out := save(t, s, msg("r3", 1, 10, 102))
		wantOutcomes(t, out, Outcome{RequestNo: "r3", Kind: Created, OrderNo: testenv.OrderNo("r3")})
		if err := s.Restock(context.Background(), 1, 99, 3); !errors.Is(err, ErrNotFound) {
			t.Fatalf("restock of an unknown sku: %v", err)
		}
	})
}
