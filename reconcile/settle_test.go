package reconcile

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"seckill/sale"
	"seckill/stock/results"
	"seckill/store"
)

// TestSettleEndsOnlyWhatTheBooksProve: a QUEUING result is settled only
// past the grace period and behind Kafka's consumed-through time; then an
// order's ticket reads SUCCESS, a ticket with neither order nor stock held
// FAIL RELEASED (both written back to Redis and the request log), and a
// ticket still holding stock stays QUEUING for the sweeper.
func TestSettleEndsOnlyWhatTheBooksProve(t *testing.T) {
	runTest(t, func(t *testing.T, r *rig) {
		ctx := context.Background()
		ordered := r.order(t, 501, 1) // its result in Redis is still the occupy's QUEUING
		held := r.occupy(t, 501, 2)
		gone := r.occupy(t, 501, 3)
		if _, err := r.stock.Release(ctx, &gone, false); err != nil {
			t.Fatal(err)
		}
		// The release's FAIL lost: QUEUING again, as a failover leaves it.
		queuing := func(m sale.Message) results.Entry {
			e := results.Entry{RequestNo: m.RequestNo, Activity: m.ActivityID, SKU: m.SKUID, Owner: m.UserID,
				State: sale.ResultQueuing}
			if err := r.res.Write(ctx, e); err != nil {
				t.Fatal(err)
			}
			return e
		}
		qOrdered, qHeld, qGone := queuing(ordered), queuing(held), queuing(gone)

		young, _ := r.reconciler(t, time.Now())
		unproven := New(DefaultConfig(), r.stock, r.st, r.res, &through{}, zaptest.NewLogger(t), nil,
			WithClock(func() time.Time { return r.later }))
		for _, rc := range []*Reconciler{young, unproven} {
			for _, e := range []results.Entry{qOrdered, qGone} {
				if got, err := rc.Settle(ctx, e); err != nil || got.State != sale.ResultQueuing {
					t.Fatalf("settled without proof: %+v %v", got, err)
				}
			}
		}

		rc, _ := r.reconciler(t, r.later)
		got, err := rc.Settle(ctx, qOrdered)
		if err != nil || got.State != sale.ResultSuccess || got.OrderNo == "" {
			t.Fatalf("the ordered ticket: %+v %v", got, err)
		}
		if got, err := rc.Settle(ctx, qHeld); err != nil || got.State != sale.ResultQueuing {
			t.Fatalf("the held ticket: %+v %v", got, err)
		}
		if got, err := rc.Settle(ctx, qGone); err != nil || got.State != sale.ResultFail || got.Code != sale.FailReleased {
			t.Fatalf("the released ticket: %+v %v", got, err)
		}
		for _, c := range []struct {
			rn   string
			user int64
			want string
		}{{ordered.RequestNo, ordered.UserID, sale.ResultSuccess}, {gone.RequestNo, gone.UserID, sale.ResultFail},
			{held.RequestNo, held.UserID, sale.ResultQueuing}} {
			rn, want := c.rn, c.want
			if e, err := r.res.Read(ctx, c.user, rn); err != nil || e.State != want {
				t.Errorf("Redis result of %s: %+v %v, want %s", rn, e, err, want)
			}
		}
		if l, err := r.st.RequestLog(ctx, gone.RequestNo); err != nil || l.Status != store.StatusFailed {
			t.Errorf("request log of the released ticket: %+v %v", l, err)
		}
		if l, err := r.st.RequestLog(ctx, ordered.RequestNo); err != nil || l.Status != store.StatusSuccess || l.OrderNo != got.OrderNo {
			t.Errorf("request log of the ordered ticket: %+v %v", l, err)
		}
		// Not QUEUING, or not a ticket number: returned as it is.
		for _, e := range []results.Entry{{RequestNo: "x", State: sale.ResultQueuing, Activity: 5, SKU: 501, Owner: 1},
			{RequestNo: ordered.RequestNo, State: sale.ResultFail, Activity: 5, SKU: 501, Owner: 1}} {
			if got, err := rc.Settle(ctx, e); err != nil || got != e {
				t.Errorf("settle %+v: %+v %v", e, got, err)
			}
		}
	})
}
