package stock

import (
	"context"
	"fmt"
	"testing"

	"seckill/sale"
)

func TestClaimBatchAnswersLikeClaimOneByOne(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a := activity(1, 11, 100, false)
	a.SKUs = append(a.SKUs, sale.SKU{ID: 12, Stock: 100, Price: 100, LimitPerUser: 1, Hot: true})
	r.preheat(t, a)
	pa, k11, _ := r.cat.Lookup(1, 11)
	_, k12, _ := r.cat.Lookup(1, 12)
	// Users 1..6 hold tickets on both SKUs; 3 is released on SKU 11, 4's
	// message names a ticket it does not hold, 5 was claimed before.
	var msgs []*sale.Message
	for _, k := range []*sale.SKU{k11, k12} {
		for u := int64(1); u <= 6; u++ {
			rn := fmt.Sprintf("rn-%d-%d", k.ID, u)
			if res, err := r.stock.Occupy(ctx, pa, k, u, rn, 1); err != nil || res.Code != CodeOK {
				t.Fatal(res, err)
			}
			msgs = append(msgs, &sale.Message{RequestNo: rn, ActivityID: 1, SKUID: k.ID, UserID: u, Quantity: 1})
		}
	}
	if out, err := r.stock.Release(ctx, msgs[2], false); err != nil || out != Released {
		t.Fatal(out, err)
	}
	msgs[3] = &sale.Message{RequestNo: "someone-else", ActivityID: 1, SKUID: 11, UserID: 4, Quantity: 1}
	if ok, err := r.stock.Claim(ctx, msgs[4]); !ok || err != nil {
		t.Fatal(ok, err)
	}
	msgs = append(msgs, &sale.Message{RequestNo: "x", ActivityID: 9, SKUID: 99, UserID: 1, Quantity: 1}) // no such SKU

	want := []bool{true, true, false, false, true, true, true, true, true, true, true, true, false}
	held, err := r.stock.ClaimBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if held[i] != want[i] {
			t.Errorf("ticket %d (%s): held %v, want %v", i, msgs[i].RequestNo, held[i], want[i])
		}
		if again, err := r.stock.Claim(ctx, msgs[i]); err != nil || again != want[i] {
			t.Errorf("ticket %d: Claim after ClaimBatch %v %v, want %v", i, again, err, want[i])
		}
	}
	if c := r.counts(t, 1, 11); c.Claimed != 4 {
		t.Fatalf("claimed on sku 11: %+v, want 4", c)
	}
	if c := r.counts(t, 1, 12); c.Claimed != 6 {
		t.Fatalf("claimed on sku 12: %+v, want 6", c)
	}
	// A claimed ticket is only released by force, as after Claim.
	if out, _ := r.stock.Release(ctx, msgs[6], false); out != Claimed {
		t.Fatalf("unforced release of a batch-claimed ticket: %v", out)
	}
}
