package stock

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestBatchesAnswerLikeOneCallPerBuyer is group commit's promise: the same
// buyers in the same order get the same answers and leave the same books
// whether the occupy script takes them one per call or in batches of any
// size. (What those answers must be is TestBatchScriptAgainstHandComputedBatches'
// table, worked out by hand.)
func TestBatchesAnswerLikeOneCallPerBuyer(t *testing.T) {
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
		if got, err = r.stock.OccupyBatch(ctx, pa, batched, Extras{}, buyers[i:i+n], got); err != nil {
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
	if cs.Remaining != cb.Remaining || cs.Sold != cb.Sold || cs.Holders != cb.Holders || cs.Pending != cb.Pending ||
		cb.Pending != cb.Holders {
		t.Fatalf("counts differ: single %+v, batched %+v", cs, cb)
	}
}

func TestTwoRequestsOfOneUserInOneBatch(t *testing.T) {
	r := newRig(t)
	a, k := r.preheat(t, activity(1, 11, 10, false))
	got, err := r.stock.OccupyBatch(context.Background(), a, k, Extras{},
		[]Buyer{{7, "first", 1}, {8, "other", 1}, {7, "second", 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []OccupyResult{{Code: CodeOK, Remaining: 9, Holder: "first"}, {Code: CodeOK, Remaining: 8, Holder: "other"}, {Code: CodeDuplicate, Remaining: -1, Holder: "first"}}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("buyer %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if c := r.counts(t, 1, 11); c.Remaining != 8 || c.Sold != 2 || c.Holders != 2 {
		t.Fatalf("counts %+v", c)
	}
}
