package stock

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// TestReleaseBatchAnswersLikeReleaseOneByOne runs one scenario on two
// rigs: on one the tickets go through ReleaseBatch in one call, on the
// other through Release one by one in the same order. Every outcome, every
// key of both SKUs (stock, sold, users, claimed, pending, qty) and the
// "available" events must come out the same — with a claimed ticket, the
// same ticket twice, a ticket whose record names another, a ticket
// released before, a multi-unit ticket on the hot shard and a SKU no one
// knows, with and without force.
func TestReleaseBatchAnswersLikeReleaseOneByOne(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force %v", force), func(t *testing.T) {
			batch, alone := newRig(t), newRig(t)
			msgs := releaseScenario(t, batch)
			releaseScenario(t, alone)
			drain(batch.events)
			drain(alone.events)
			ctx := context.Background()
			got, err := batch.stock.ReleaseBatch(ctx, msgs, force)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]ReleaseOutcome, len(msgs))
			for i, m := range msgs {
				if want[i], err = alone.stock.Release(ctx, m, force); err != nil {
					t.Fatal(err)
				}
			}
			for i := range msgs {
				if got[i] != want[i] {
					t.Errorf("ticket %d (%s of user %d, sku %d): batch %v, one by one %v",
						i, msgs[i].RequestNo, msgs[i].UserID, msgs[i].SKUID, got[i], want[i])
				}
			}
			if n := countOf(got, Released); n < 4 {
				t.Fatalf("only %d tickets released: the scenario tests too little", n)
			}
			for _, sku := range []int64{11, 12} {
				if b, a := batch.keys(t, 1, sku), alone.keys(t, 1, sku); b != a {
					t.Errorf("sku %d after the batch:\n%s\none by one:\n%s", sku, b, a)
				}
			}
			if b, a := skusOf(taken(batch)), skusOf(taken(alone)); fmt.Sprint(b) != fmt.Sprint(a) {
				t.Errorf("available events for skus %v, one by one %v", b, a)
			}
		})
	}
}

// releaseScenario: users 1..6 hold a ticket of SKU 11 (default shard, one
// unit) and of SKU 12 (hot shard, 1–3 units); users 2 and 5 are claimed on
// both, user 3's ticket of SKU 11 was released already. It returns the
// tickets to release.
func releaseScenario(t *testing.T, r *rig) []*sale.Message {
	t.Helper()
	ctx := context.Background()
	act := activity(1, 11, 50, false)
	act.SKUs = append(act.SKUs, sale.SKU{ID: 12, Stock: 50, Price: 100, LimitPerUser: 3, Hot: true})
	r.preheat(t, act)
	pa, k11, _ := r.cat.Lookup(1, 11)
	_, k12, _ := r.cat.Lookup(1, 12)
	ticket := func(k *sale.SKU, u int64) *sale.Message {
		return &sale.Message{RequestNo: fmt.Sprintf("rn-%d-%d", k.ID, u), ActivityID: 1, SKUID: k.ID, UserID: u, Quantity: 1}
	}
	for _, k := range []*sale.SKU{k11, k12} {
		for u := int64(1); u <= 6; u++ {
			q := int64(1)
			if k.LimitPerUser > 1 {
				q = 1 + u%3
			}
			if res, err := r.stock.Occupy(ctx, pa, k, u, ticket(k, u).RequestNo, q); err != nil || res.Code != CodeOK {
				t.Fatal(res, err)
			}
		}
		if _, err := r.stock.ClaimBatch(ctx, []*sale.Message{ticket(k, 2), ticket(k, 5)}); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := r.stock.Release(ctx, ticket(k11, 3), false); err != nil || out != Released {
		t.Fatal(out, err)
	}
	return []*sale.Message{
		ticket(k11, 1), ticket(k12, 1),
		ticket(k11, 2), ticket(k12, 2), // claimed
		ticket(k11, 3), // released before
		ticket(k12, 3),
		ticket(k12, 3), // the same ticket again
		{RequestNo: "someone-else", ActivityID: 1, SKUID: 11, UserID: 4, Quantity: 1},
		ticket(k11, 4),
		ticket(k12, 5), ticket(k12, 6), ticket(k11, 6),
		ticket(k11, 5), ticket(k11, 5), // claimed, twice
		{RequestNo: "x", ActivityID: 9, SKUID: 99, UserID: 1, Quantity: 1}, // no such SKU
	}
}

// keys prints every stock key of a SKU, the pending journal without its
// scores (accept times differ between rigs).
func (r *rig) keys(t *testing.T, a, sku int64) string {
	t.Helper()
	k := sale.KeysFor(a, sku)
	srv := r.def
	if sku == 12 {
		srv = r.hot
	}
	str := func(args ...string) string {
		t.Helper()
		v, err := srv.Do(t, args...).ToAny()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatalf("%v: %v", args, err)
		}
		if l, ok := v.([]any); ok {
			ss := make([]string, len(l))
			for i, x := range l {
				ss[i] = fmt.Sprint(x)
			}
			slices.Sort(ss)
			return fmt.Sprint(ss)
		}
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("stock %s sold %s users %s claimed %s pending %s qty %s", str("GET", k.Stock), str("GET", k.Sold),
		str("HGETALL", k.Users), str("SMEMBERS", k.Claim), str("ZRANGE", k.Pending, "0", "-1"), str("HGETALL", k.Qty))
}

func countOf(outs []ReleaseOutcome, o ReleaseOutcome) int {
	n := 0
	for _, x := range outs {
		if x == o {
			n++
		}
	}
	return n
}

// taken empties the rig's event channel and returns what it held.
func taken(r *rig) []sale.Event {
	var out []sale.Event
	for {
		select {
		case e := <-r.events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// skusOf lists the SKUs that had an "available" event, each once, sorted.
func skusOf(es []sale.Event) []int64 {
	var out []int64
	for _, e := range es {
		if e.Kind == sale.EventAvailable && !slices.Contains(out, e.SKU) {
			out = append(out, e.SKU)
		}
	}
	slices.Sort(out)
	return out
}

// TestReleaseBatchSurvivesAFlushedScriptCache: after SCRIPT FLUSH (a
// restarted Redis) the pipelined calls answer NOSCRIPT and go again with
// EVAL, and the release still happens once.
func TestReleaseBatchSurvivesAFlushedScriptCache(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 10, false))
	var msgs []*sale.Message
	for u := int64(1); u <= 3; u++ {
		rn := fmt.Sprint("rn-", u)
		if res, err := r.stock.Occupy(ctx, a, k, u, rn, 1); err != nil || res.Code != CodeOK {
			t.Fatal(res, err)
		}
		msgs = append(msgs, &sale.Message{RequestNo: rn, ActivityID: 1, SKUID: 11, UserID: u, Quantity: 1})
	}
	if _, err := r.stock.ClaimBatch(ctx, msgs[:1]); err != nil {
		t.Fatal(err)
	}
	r.def.Do(t, "SCRIPT", "FLUSH")
	if held, err := r.stock.ClaimBatch(ctx, msgs[1:2]); err != nil || !held[0] {
		t.Fatalf("claim after SCRIPT FLUSH: %v %v", held, err)
	}
	r.def.Do(t, "SCRIPT", "FLUSH")
	out, err := r.stock.ReleaseBatch(ctx, msgs, false)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(out) != fmt.Sprint([]ReleaseOutcome{Claimed, Claimed, Released}) {
		t.Fatalf("outcomes %v", out)
	}
	if c := r.counts(t, 1, 11); c.Remaining != 8 || c.Holders != 2 || c.Pending != 0 {
		t.Fatalf("counts %+v", c)
	}
}
