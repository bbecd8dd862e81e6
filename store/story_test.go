package store

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

// rowCount counts table's rows (a test reads the real database).
func rowCount(t *testing.T, s Store, table string) int {
	t.Helper()
	var n int
	if err := s.(*sqlStore).r.QueryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// openWithClock opens a store whose clock reads now until set.
func openWithClock(t *testing.T, r runner) (Store, *atomic.Pointer[time.Time]) {
	t.Helper()
	clock := new(atomic.Pointer[time.Time])
	now := time.Now()
	clock.Store(&now)
	return r.open(t, WithClock(func() time.Time { return *clock.Load() })), clock
}

// storyOf is a history as "STATUS(remark)@ms" steps.
func storyOf(h []Event) string {
	var b strings.Builder
	for _, e := range h {
		fmt.Fprintf(&b, "%s(%s)@%d ", e.Status, e.Remark, e.At.UnixMilli())
	}
	return b.String()
}

// TestBatchTellsItsStoryInOneRow: a delivered batch writes one request-log
// row per ticket and no history rows, and every ticket's history still
// tells STOCK_OCCUPIED at its requestNo's time, MQ_QUEUED when the engine
// built its message, then ORDER_CREATED and SUCCESS (or FAILED, with its
// remark) when the batch decided — read one by one and in bulk alike.
func TestBatchTellsItsStoryInOneRow(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s, clock := openWithClock(t, r)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 600}))
		rns := sale.NewRequestNos(1)
		var msgs []sale.Message
		for i := range 700 {
			m := msg(rns.Next(1, 10), 1, 10, int64(100+i))
			m.AcceptedAt += int64(i % 7)
			msgs = append(msgs, m)
		}
		// Decided a second after the last ticket (opening MySQL takes a while).
		decided := time.UnixMilli(time.Now().UnixMilli() + 1000)
		clock.Store(&decided)
		out, err := s.SaveBatch(ctx, msgs, Delivered("result written"))
		if err != nil {
			t.Fatal(err)
		}
		if n := rowCount(t, s, "seckill_request_event"); n != 0 {
			t.Errorf("%d history rows for a batch of %d, want 0", n, len(msgs))
		}
		if n := rowCount(t, s, "seckill_request_log"); n != len(msgs) {
			t.Errorf("%d request-log rows for %d tickets", n, len(msgs))
		}
		all := make([]string, len(msgs))
		for i, m := range msgs {
			all[i] = m.RequestNo
		}
		bulk, err := s.RequestHistories(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for i, m := range msgs {
			at, ok := sale.RequestNoTime(m.RequestNo)
			if !ok {
				t.Fatalf("requestNo %s has no time", m.RequestNo)
			}
			want := fmt.Sprintf("%s()@%d %s()@%d ", StatusStockOccupied, at.UnixMilli(), StatusMQQueued, m.AcceptedAt)
			if out[i].Kind == Created {
				created++
				want += fmt.Sprintf("%s()@%d %s(result written)@%d ", StatusOrderCreated, decided.UnixMilli(),
					StatusSuccess, decided.UnixMilli())
			} else {
				want += fmt.Sprintf("%s(sold out in the database snapshot)@%d ", StatusFailed, decided.UnixMilli())
			}
			one, err := s.RequestEvents(ctx, m.RequestNo)
			if err != nil {
				t.Fatal(err)
			}
			if got := storyOf(one); got != want {
				t.Fatalf("ticket %d (%v): history %s, want %s", i, out[i].Kind, got, want)
			}
			if got := storyOf(bulk[m.RequestNo]); got != want {
				t.Fatalf("ticket %d: bulk history %s, want %s", i, got, want)
			}
		}
		if created != 600 {
			t.Errorf("%d created, want 600", created)
		}
	})
}

// TestStoryMergesWithLaterAndEarlierSteps: the steps written as history
// rows before a batch (the engine's COMPENSATING) and after it (payment,
// also in the batch's own millisecond) sit in time order around the
// batch's steps; a ticket only LogRequests wrote has its rows alone.
func TestStoryMergesWithLaterAndEarlierSteps(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s, clock := openWithClock(t, r)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		rns := sale.NewRequestNos(1)
		m := msg(rns.Next(1, 10), 1, 10, 100)
		occupied, _ := sale.RequestNoTime(m.RequestNo)
		comp := occupied.Add(time.Millisecond)
		if err := s.LogRequests(ctx, []LogEntry{{RequestNo: m.RequestNo, ActivityID: 1, SKUID: 10, UserID: 100,
			Quantity: 1, Status: "COMPENSATING", Remark: "produce timed out", Created: occupied, At: comp}}); err != nil {
			t.Fatal(err)
		}
		// Decided a second after the ticket (opening MySQL takes a while).
		decided := occupied.Add(time.Second)
		clock.Store(&decided)
		m.AcceptedAt = comp.Add(time.Millisecond).UnixMilli()
		if _, err := s.SaveBatch(ctx, []sale.Message{m}, Delivered("result written")); err != nil {
			t.Fatal(err)
		}
		// Paid in the batch's millisecond: it still comes after SUCCESS.
		if _, _, err := s.ConfirmPayment(ctx, Payment{OrderNo: testenv.OrderNo(m.RequestNo), ProviderRef: "ref-1",
			Amount: 990}, occupied.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		evs, err := s.RequestEvents(ctx, m.RequestNo)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Status)
		}
		want := fmt.Sprint([]string{StatusStockOccupied, "COMPENSATING", StatusMQQueued, StatusOrderCreated,
			StatusSuccess, EventOrderPaid})
		if fmt.Sprint(got) != want {
			t.Errorf("history %v, want %v: %s", got, want, storyOf(evs))
		}
		if e, err := s.RequestLog(ctx, m.RequestNo); err != nil || e.Status != StatusSuccess {
			t.Errorf("request log %+v, %v", e, err)
		}

		// A ticket the batch never saw: its history is its rows alone.
		o := rns.Next(1, 10)
		if err := s.LogRequests(ctx, []LogEntry{{RequestNo: o, ActivityID: 1, SKUID: 10, UserID: 101, Quantity: 1,
			Status: StatusFailed, Remark: "compensated"}}); err != nil {
			t.Fatal(err)
		}
		h, err := s.RequestHistories(ctx, []string{o, m.RequestNo})
		if err != nil {
			t.Fatal(err)
		}
		if len(h[o]) != 1 || h[o][0].Status != StatusFailed || h[o][0].Remark != "compensated" {
			t.Errorf("history of a logged-only ticket: %+v", h[o])
		}
		if storyOf(h[m.RequestNo]) != storyOf(evs) {
			t.Errorf("bulk history %s, one by one %s", storyOf(h[m.RequestNo]), storyOf(evs))
		}
	})
}

// TestStoryTellsTheEdgesStepsFirst: the edge's steps before stock is
// taken (TOKEN_VERIFIED, RISK_PASSED, event rows) come before the batch's
// STOCK_OCCUPIED when they share its millisecond.
func TestStoryTellsTheEdgesStepsFirst(t *testing.T) {
	runTest(t, func(t *testing.T, r runner) {
		ctx := context.Background()
		s, clock := openWithClock(t, r)
		put(t, s, activity(1, sale.SKU{ID: 10, Stock: 5}))
		m := msg(sale.NewRequestNos(1).Next(1, 10), 1, 10, 100)
		occupied, _ := sale.RequestNoTime(m.RequestNo)
		decided := occupied.Add(time.Millisecond)
		clock.Store(&decided)
		if err := s.AppendEvents(ctx, []Event{
			{RequestNo: m.RequestNo, Status: StatusRiskPassed, Remark: "risk service: allow", At: occupied},
			{RequestNo: m.RequestNo, Status: StatusTokenVerified, At: occupied},
		}); err != nil {
			t.Fatal(err)
		}
		m.AcceptedAt = occupied.UnixMilli()
		if _, err := s.SaveBatch(ctx, []sale.Message{m}, Delivered("result written")); err != nil {
			t.Fatal(err)
		}
		evs, err := s.RequestEvents(ctx, m.RequestNo)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, e.Status)
		}
		want := fmt.Sprint([]string{StatusTokenVerified, StatusRiskPassed, StatusStockOccupied, StatusMQQueued,
			StatusOrderCreated, StatusSuccess})
		if fmt.Sprint(got) != want {
			t.Errorf("history %v, want %v: %s", got, want, storyOf(evs))
		}
	})
}
