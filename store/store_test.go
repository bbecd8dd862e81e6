package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/testenv"
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
	runTest(t, func(t *testing.T, r runner) {
		const (
			stock   = 50
			workers = 6
			batches = 8
			size    = 10
		)
		s := r.open(t)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: stock}, sale.SKU{ID: 11, Stock: stock}))
		var (
			wg        sync.WaitGroup
			created   atomic.Int64
			rollbacks atomic.Int64
		)
		for w := range workers {
			wg.Go(func() {
				for b := range batches {
					var msgs []sale.Message
					for i := range size {
						// Users overlap between workers, so the same user
						// races on one SKU from several batches; SKUs
						// alternate, so batches lock both snapshot rows.
						u := int64((b*size + i) % 60)
						req := fmt.Sprintf("w%d-b%d-i%d", w, b, i)
						msgs = append(msgs, msg(req, 1, 10+int64(i%2), u))
					}
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
					for _, o := range out {
						if o.Kind == Created {
							created.Add(1)
						}
					}
				}
			})
		}
		wg.Wait()
		t.Logf("%d batches rolled back and retried", rollbacks.Load())
		var total int64
		for _, sku := range []int64{10, 11} {
			sn := snapshot(t, s, 1, sku)
			n, units, err := s.CountOrders(context.Background(), 1, sku)
			if err != nil {
				t.Fatal(err)
			}
			if sn.Available < 0 || units > stock || units != sn.Sold || sn.Available+sn.Sold != stock {
				t.Errorf("sku %d: snapshot %+v, %d orders holding %d units", sku, sn, n, units)
			}
			total += n
		}
		if total != created.Load() {
			t.Errorf("%d orders in the database, %d reported Created", total, created.Load())
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
		wantOutcomes(t, out, Outcome{RequestNo: "r3", Kind: Created, OrderNo: sale.OrderNo("r3")})
		if err := s.Restock(context.Background(), 1, 99, 3); !errors.Is(err, ErrNotFound) {
			t.Fatalf("restock of an unknown sku: %v", err)
		}
	})
}
