package stock

import (
	"context"
	"math/rand/v2"
	"strconv"
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
