package reconcile

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"seckill/sale"
	"seckill/stock"
	"seckill/store"
)

// bucketedAct sells activity 6: SKU 601 of 8 units in 4 buckets, beside
// the rig's activity.
func (r *rig) bucketedAct(t *testing.T) (*sale.Activity, *sale.SKU) {
	t.Helper()
	now := time.Now()
	a := sale.Activity{ID: 6, Start: now.Add(-time.Hour), End: now.Add(2 * time.Hour), State: sale.StateOnline,
		SKUs: []sale.SKU{{ID: 601, Stock: 8, Price: 100, LimitPerUser: 1, Buckets: 4}}}
	ctx := context.Background()
	if err := r.st.PutActivity(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := r.stock.Preheat(ctx, a); err != nil {
		t.Fatal(err)
	}
	return &a, &a.SKUs[0]
}

// orderIn occupies, claims and orders one unit of a bucketed SKU for user.
func (r *rig) orderIn(t *testing.T, a *sale.Activity, k *sale.SKU, user int64) sale.Message {
	t.Helper()
	ctx := context.Background()
	rn := r.ids.NextIn(a.ID, k.ID, k.BucketOf(user))
	res, err := r.stock.Occupy(ctx, a, k, user, rn, 1)
	if err != nil || res.Code != stock.CodeOK {
		t.Fatalf("occupy sku %d user %d: %+v %v", k.ID, user, res, err)
	}
	m := sale.Message{RequestNo: rn, ActivityID: a.ID, SKUID: k.ID, UserID: user, Quantity: 1, UnitPrice: 100,
		AcceptedAt: time.Now().UnixMilli()}
	if ok, err := r.stock.Claim(ctx, &m); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if out, err := r.st.SaveBatch(ctx, []sale.Message{m}); err != nil || out[0].Kind != store.Created {
		t.Fatalf("save: %+v %v", out, err)
	}
	return m
}

func driftGauge(t *testing.T, g prometheus.Gatherer, sku int64, kind string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "seckill_reconcile_drift" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["sku"] == strconv.FormatInt(sku, 10) && l["kind"] == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no drift series for sku %d kind %s", sku, kind)
	return 0
}

// TestBucketedSKUReconciledByItsBuckets: a SKU of 4 buckets with orders and
// a transfer is no drift in the periodic pass or the full run (its books
// are the buckets' sums); a unit created in one bucket behind the scripts'
// back is a "buckets" drift in the report and the metric; an order whose
// buyer's record its bucket lost is found and restored in that bucket.
func TestBucketedSKUReconciledByItsBuckets(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		a, k := r.bucketedAct(t)
		var last sale.Message
		for u := int64(1); u <= 3; u++ {
			last = r.orderIn(t, a, k, u)
		}
		if n, err := r.stock.Transfer(ctx, a.ID, k, 0, 1, 1); err != nil || n != 1 {
			t.Fatalf("transfer: %d %v", n, err)
		}
		rc, reg := r.reconciler(t, time.Now().Add(time.Minute))
		rep, err := rc.Pass(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := drifts(rep); len(got) != 0 {
			t.Fatalf("pass: drift in clean bucketed books: %v", got)
		}
		rep, err = rc.Run(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := drifts(rep); len(got) != 0 {
			t.Fatalf("run: drift in clean bucketed books: %v", got)
		}
		line := lineOf(t, rep, 601)
		if line.Redis.Initial != 8 || line.Redis.Sold != 3 || line.Redis.Remaining != 5 || line.Redis.Records != 3 {
			t.Fatalf("run: the SKU's line is not the buckets' sums: %+v", line.Redis)
		}

		// A unit created in bucket 2 behind the scripts' back.
		r.redis.Do(t, "INCRBY", sale.KeysIn(a.ID, k.ID, 2).Stock, "3")
		for name, run := range map[string]func(context.Context, bool) (Report, error){"pass": rc.Pass, "run": rc.Run} {
			rep, err := run(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			line := lineOf(t, rep, 601)
			if got := driftOf(line, KindBuckets); got != 3 {
				t.Fatalf("%s: buckets drift %d, want 3: %+v", name, got, line.Drifts)
			}
			if got := driftGauge(t, reg, 601, KindBuckets); got != 3 {
				t.Fatalf("%s: drift gauge %v, want 3", name, got)
			}
		}
		r.redis.Do(t, "DECRBY", sale.KeysIn(a.ID, k.ID, 2).Stock, "3")

		// The bucket of the last buyer loses its record of a live order.
		b := k.BucketOf(last.UserID)
		users := sale.KeysIn(a.ID, k.ID, b).Users
		r.redis.Do(t, "HDEL", users, strconv.FormatInt(last.UserID, 10))
		rc2, _ := r.reconciler(t, time.Now().Add(time.Minute)) // a fresh watermark: audits every order
		rep, err = rc2.Pass(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		if got := repairs(rep)["601/"+KindOrderWithoutClaim]; got != 1 {
			t.Fatalf("repairs %v, want one order_without_claim on 601", repairs(rep))
		}
		got, err := r.redis.Do(t, "HGET", users, strconv.FormatInt(last.UserID, 10)).ToString()
		if err != nil || got != last.RequestNo {
			t.Fatalf("bucket %d record of user %d: %q %v, want %s", b, last.UserID, got, err, last.RequestNo)
		}
		own, err := r.redis.Do(t, "EXISTS", sale.KeysFor(a.ID, k.ID).Users).AsInt64()
		if err != nil || own != 0 {
			t.Fatalf("the repair wrote the SKU's own (unused) users hash: %d %v", own, err)
		}
	})
}
