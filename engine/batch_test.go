package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/sale"
)

func TestBatchScriptAnswersLikeOneCallPerBuyer(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	// Twin SKUs: 11 is sold one call per buyer, 12 in batches of random
	// size; the same buyers in the same order must get the same answers.
	a := activity(1, 11, 60, false)
	a.SKUs[0].LimitPerUser = 2
	a.SKUs = append(a.SKUs, a.SKUs[0])
	a.SKUs[1].ID = 12
	r.preheat(t, a)
	pa, single, _ := r.cat.Lookup(1, 11)
	_, batched, _ := r.cat.Lookup(1, 12)

	rng := rand.New(rand.NewPCG(1, 2))
	var buyers []Buyer
	for i := range 400 {
		q := []int64{1, 1, 1, 2, 3}[rng.IntN(5)]
		buyers = append(buyers, Buyer{UserID: int64(rng.IntN(90) + 1), RequestNo: "r" + strconv.Itoa(i), Quantity: q})
	}
	markAt, clearAt := 40, 55 // the on-call mark is set for buyers 40..54
	var want, got []OccupyResult
	for i, b := range buyers {
		switch i {
		case markAt:
			_ = r.stock.SetSoldOut(ctx, 1, 11, true)
		case clearAt:
			_ = r.stock.SetSoldOut(ctx, 1, 11, false)
		}
		res, err := r.stock.Occupy(ctx, pa, single, b.UserID, b.RequestNo, b.Quantity)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}
	for i := 0; i < len(buyers); {
		n := min(1+rng.IntN(17), len(buyers)-i)
		// Cut batches at the mark's edges, as the single run saw them.
		for _, edge := range []int{markAt, clearAt} {
			if i < edge && i+n > edge {
				n = edge - i
			}
		}
		switch i {
		case markAt:
			_ = r.stock.SetSoldOut(ctx, 1, 12, true)
		case clearAt:
			_ = r.stock.SetSoldOut(ctx, 1, 12, false)
		}
		var err error
		if got, err = r.stock.OccupyBatch(ctx, pa, batched, buyers[i:i+n], got); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	codes := map[string]int{}
	for i := range buyers {
		codes[want[i].Code]++
		if got[i] != want[i] {
			t.Errorf("buyer %d %+v: batched %+v, single %+v", i, buyers[i], got[i], want[i])
		}
	}
	for _, c := range []string{CodeOK, CodeDuplicate, CodeOverLimit, CodeSoldOut} {
		if codes[c] == 0 {
			t.Errorf("the sequence never produced %s (%v): pick another seed", c, codes)
		}
	}
	cs, cb := r.counts(t, 1, 11), r.counts(t, 1, 12)
	if cs.Remaining != cb.Remaining || cs.Sold != cb.Sold || cs.Holders != cb.Holders {
		t.Fatalf("counts differ: single %+v, batched %+v", cs, cb)
	}
}

func TestBatchScriptAnswersAWholeBatchThatCannotBuy(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	now := time.Now()
	notStarted := activity(2, 21, 5, false)
	notStarted.Start, notStarted.End = now.Add(time.Hour), now.Add(2*time.Hour)
	ended := activity(3, 31, 5, false)
	ended.Start, ended.End = now.Add(-2*time.Hour), now.Add(-time.Hour)
	offline := activity(4, 41, 5, false)
	offline.State = sale.StateOffline
	never := activity(5, 51, 5, false) // not preheated: no meta
	tests := []struct {
		name string
		a    sale.Activity
		code string
	}{
		{"a batch before the start is not open", notStarted, CodeNotOpen},
		{"a batch after the end has ended", ended, CodeEnded},
		{"a batch on an offline activity is not open", offline, CodeNotOpen},
		{"a batch on an activity never preheated (or lost by Redis) is missing", never, CodeMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, k := &tc.a, &tc.a.SKUs[0]
			if tc.a.ID != never.ID {
				a, k = r.preheat(t, tc.a)
			}
			buyers := []Buyer{{1, "x1", 1}, {2, "x2", 1}, {1, "x3", 1}}
			got, err := r.stock.OccupyBatch(ctx, a, k, buyers, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, g := range got {
				single, err := r.stock.Occupy(ctx, a, k, buyers[i].UserID, buyers[i].RequestNo, 1)
				if err != nil {
					t.Fatal(err)
				}
				if g != (OccupyResult{Code: tc.code, Remaining: -1}) || g != single {
					t.Fatalf("buyer %d: batched %+v, single %+v, want %s", i, g, single, tc.code)
				}
			}
		})
	}
}

func TestTwoRequestsOfOneUserInOneBatch(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	got, err := r.stock.OccupyBatch(context.Background(), a, k,
		[]Buyer{{7, "first", 1}, {8, "other", 1}, {7, "second", 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []OccupyResult{{CodeOK, 9, "first"}, {CodeOK, 8, "other"}, {CodeDuplicate, -1, "first"}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("buyer %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if c := r.counts(t, 1, 11); c.Remaining != 8 || c.Sold != 2 || c.Holders != 2 {
		t.Fatalf("counts %+v", c)
	}
}

func TestBatcherCoalescesUnderLoadWithinTheBound(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 1001, 100000, true))
	b := NewBatcher(r.stock, BatchConfig{Enabled: true, MaxSize: 16}, time.Second)
	var mu sync.Mutex
	sizes := map[int]int{}
	b.onBatch = func(n int) { mu.Lock(); sizes[n]++; mu.Unlock() }

	const workers, each = 64, 40
	var wg sync.WaitGroup
	var oks atomic.Int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				u := int64(g*each + i + 1)
				res, err := b.Occupy(context.Background(), a, k, u, fmt.Sprint("rn", u), 1)
				if err != nil || res.Code != CodeOK || res.Holder != fmt.Sprint("rn", u) {
					t.Errorf("user %d: %+v %v", u, res, err)
					return
				}
				oks.Add(1)
			}
		}()
	}
	wg.Wait()
	calls, buyers, biggest := 0, 0, 0
	for n, c := range sizes {
		calls += c
		buyers += n * c
		biggest = max(biggest, n)
	}
	if buyers != workers*each || oks.Load() != workers*each {
		t.Fatalf("%d buyers sent, %d OK, want %d", buyers, oks.Load(), workers*each)
	}
	if biggest > 16 {
		t.Fatalf("a batch of %d buyers, above max_size 16 (%v)", biggest, sizes)
	}
	if calls >= buyers/2 {
		t.Fatalf("%d script calls for %d buyers: concurrent occupies were not coalesced (%v)", calls, buyers, sizes)
	}
	if c := r.counts(t, 1, 1001); c.Sold != workers*each || c.Holders != workers*each {
		t.Fatalf("counts %+v", c)
	}
	t.Logf("%d buyers in %d script calls; sizes %v", buyers, calls, sizes)
}

func TestBatcherSendsALoneOccupyAtOnce(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	var sizes []int
	b.onBatch = func(n int) { sizes = append(sizes, n) }
	for u := int64(1); u <= 3; u++ {
		res, err := b.Occupy(context.Background(), a, k, u, fmt.Sprint("rn", u), 1)
		if err != nil || res != (OccupyResult{CodeOK, 10 - u, fmt.Sprint("rn", u)}) {
			t.Fatalf("user %d: %+v %v", u, res, err)
		}
	}
	if fmt.Sprint(sizes) != "[1 1 1]" {
		t.Fatalf("batch sizes %v, want each idle occupy sent alone", sizes)
	}
}

func TestBatcherDropsABuyerWhoseContextEnded(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	b := NewBatcher(r.stock, DefaultConfig().Batch, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Occupy(ctx, a, k, 1, "gone", 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("occupy with an ended context: %v", err)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 10 || c.Holders != 0 {
		t.Fatalf("a buyer who had gone was occupied: %+v", c)
	}
}

// TestBatchScriptAgainstHandComputedBatches checks occupy_batch.lua against
// expectations worked out by hand from its documented rules (the header of
// lua/occupy_batch.lua and README "The life of a ticket": status and window,
// then the user's record, then the per-user limit, then the on-call mark and
// the stock), not against occupy.lua: a rule broken in both scripts alike
// passes the comparison above but not this table. Codes are the documented
// strings, and the books are read from Redis by the key names of DESIGN §5.
func TestBatchScriptAgainstHandComputedBatches(t *testing.T) {
	const a, b, c, d = 1, 2, 3, 4 // buyers
	type want struct {
		code      string
		remaining int64
		holder    string
	}
	now := time.Now()
	tests := []struct {
		name         string
		stock, limit int64
		tweak        func(*sale.Activity)
		before       []Buyer // an earlier call's buyers, all OK
		mark         bool    // the on-call sold-out mark, set after before
		buyers       []Buyer
		want         []want
		remaining    int64            // the stock key after the call
		sold         int64            // the sold key
		users        map[int64]string // the users hash: userId -> requestNo
	}{
		{
			name:  "stock 3 sells to a, b and c; a's second ticket is a duplicate of its first; d finds it sold out",
			stock: 3, limit: 1,
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}, {a, "ra2", 1}, {c, "rc", 1}, {d, "rd", 1}},
			want:      []want{{"OK", 2, "ra"}, {"OK", 1, "rb"}, {"DUPLICATE", -1, "ra"}, {"OK", 0, "rc"}, {"SOLD_OUT", 0, ""}},
			remaining: 0, sold: 3, users: map[int64]string{a: "ra", b: "rb", c: "rc"},
		},
		{
			name:  "a quantity above the per-user limit takes nothing and does not bar the buyer's next ticket",
			stock: 10, limit: 2,
			buyers:    []Buyer{{a, "ra", 3}, {b, "rb", 2}, {a, "ra2", 1}, {c, "rc", 5}},
			want:      []want{{"OVER_LIMIT", -1, ""}, {"OK", 8, "rb"}, {"OK", 7, "ra2"}, {"OVER_LIMIT", -1, ""}},
			remaining: 7, sold: 3, users: map[int64]string{b: "rb", a: "ra2"},
		},
		{
			name:  "a quantity above what remains is sold out, and a smaller one after it still fits",
			stock: 4, limit: 3,
			buyers:    []Buyer{{a, "ra", 3}, {b, "rb", 2}, {c, "rc", 1}, {d, "rd", 1}},
			want:      []want{{"OK", 1, "ra"}, {"SOLD_OUT", 1, ""}, {"OK", 0, "rc"}, {"SOLD_OUT", 0, ""}},
			remaining: 0, sold: 4, users: map[int64]string{a: "ra", c: "rc"},
		},
		{
			name:  "a buyer holding a ticket from an earlier call is a duplicate of it, even over the limit",
			stock: 5, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			buyers:    []Buyer{{a, "ra", 2}, {b, "rb", 1}, {b, "rb2", 1}},
			want:      []want{{"DUPLICATE", -1, "r0"}, {"OK", 3, "rb"}, {"DUPLICATE", -1, "rb"}},
			remaining: 3, sold: 2, users: map[int64]string{a: "r0", b: "rb"},
		},
		{
			name:  "the on-call mark sells nothing with stock left; a duplicate and an over-limit keep their codes",
			stock: 5, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			mark:      true,
			buyers:    []Buyer{{b, "rb", 1}, {a, "ra", 1}, {c, "rc", 2}},
			want:      []want{{"SOLD_OUT", 0, ""}, {"DUPLICATE", -1, "r0"}, {"OVER_LIMIT", -1, ""}},
			remaining: 4, sold: 1, users: map[int64]string{a: "r0"},
		},
		{
			name:  "before the window opens nothing sells",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.Start, x.End = now.Add(time.Hour), now.Add(2*time.Hour) },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"NOT_OPEN", -1, ""}, {"NOT_OPEN", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
		{
			name:  "after the window ends nothing sells",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.Start, x.End = now.Add(-2*time.Hour), now.Add(-time.Second) },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"ENDED", -1, ""}, {"ENDED", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
		{
			name:  "an offline activity sells nothing inside its window",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.State = sale.StateOffline },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"NOT_OPEN", -1, ""}, {"NOT_OPEN", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
	}
	r := newRig(t)
	rdb := r.def.Client(t)
	ctx := context.Background()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			act := activity(int64(100+i), int64(1000+i), tc.stock, false)
			act.SKUs[0].LimitPerUser = tc.limit
			if tc.tweak != nil {
				tc.tweak(&act)
			}
			pa, k := r.preheat(t, act)
			if len(tc.before) > 0 {
				got, err := r.stock.OccupyBatch(ctx, pa, k, tc.before, nil)
				if err != nil {
					t.Fatal(err)
				}
				for j, g := range got {
					if g.Code != "OK" {
						t.Fatalf("earlier buyer %d: %+v", j, g)
					}
				}
			}
			if tc.mark {
				if err := r.stock.SetSoldOut(ctx, act.ID, k.ID, true); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.stock.OccupyBatch(ctx, pa, k, tc.buyers, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d answers for %d buyers", len(got), len(tc.buyers))
			}
			for j, w := range tc.want {
				if g := got[j]; g.Code != w.code || g.Remaining != w.remaining || g.Holder != w.holder {
					t.Errorf("buyer %d %+v: %+v, want %+v", j, tc.buyers[j], g, w)
				}
			}
			// DESIGN §5: sk:{a<activity>:s<sku>}:stock, :sold, :users.
			p := fmt.Sprintf("sk:{a%d:s%d}:", act.ID, k.ID)
			get := func(key string) int64 {
				t.Helper()
				n, err := rdb.Do(ctx, rdb.B().Get().Key(p+key).Build()).AsInt64()
				if err != nil {
					t.Fatalf("GET %s%s: %v", p, key, err)
				}
				return n
			}
			if rem, sold := get("stock"), get("sold"); rem != tc.remaining || sold != tc.sold {
				t.Errorf("remaining %d sold %d, want %d and %d", rem, sold, tc.remaining, tc.sold)
			}
			users, err := rdb.Do(ctx, rdb.B().Hgetall().Key(p+"users").Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for u, rn := range tc.users {
				want[strconv.FormatInt(u, 10)] = rn
			}
			if fmt.Sprint(users) != fmt.Sprint(want) {
				t.Errorf("users %v, want %v", users, want)
			}
		})
	}
	t.Run("an activity never preheated (or lost by Redis) is missing for every buyer", func(t *testing.T) {
		act := activity(99, 999, 5, false)
		got, err := r.stock.OccupyBatch(ctx, &act, &act.SKUs[0], []Buyer{{a, "ra", 1}, {b, "rb", 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, g := range got {
			if g != (OccupyResult{Code: "MISSING", Remaining: -1}) {
				t.Errorf("buyer %d: %+v, want MISSING", j, g)
			}
		}
		if n, err := rdb.Do(ctx, rdb.B().Exists().Key("sk:{a99:s999}:stock", "sk:{a99:s999}:users").Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("a missing SKU's keys were written: %d (%v)", n, err)
		}
	})
}
