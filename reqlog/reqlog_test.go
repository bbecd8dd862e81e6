package reqlog

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"seckill/sale"
	"seckill/store"
)

func TestQueuedStepsAreWrittenByClose(t *testing.T) {
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "log.db")
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 8)
	for i := range 20 { // more than the queue holds: some are dropped
		m := &sale.Message{RequestNo: "r" + strconv.Itoa(i), ActivityID: 1, SKUID: 2, UserID: 3, Quantity: 1}
		w.Record(m, "COMPENSATING", "produce failed")
		w.Record(m, "FAILED", "compensated: released")
	}
	w.Close()
	w.Close()
	var written, dropped dto.Metric
	_ = w.steps.WithLabelValues("written").Write(&written)
	_ = w.steps.WithLabelValues("dropped").Write(&dropped)
	if written.GetCounter().GetValue()+dropped.GetCounter().GetValue() != 40 || written.GetCounter().GetValue() == 0 {
		t.Fatalf("written %v, dropped %v of 40", written.GetCounter().GetValue(), dropped.GetCounter().GetValue())
	}
	evs, err := st.RequestEvents(context.Background(), "r0")
	if err != nil || len(evs) != 2 || evs[0].Status != "COMPENSATING" || evs[1].Status != "FAILED" {
		t.Fatalf("history of r0: %+v, %v", evs, err)
	}
	e, err := st.RequestLog(context.Background(), "r0")
	if err != nil || e.Status != "FAILED" {
		t.Fatalf("request log of r0: %+v, %v", e, err)
	}
}

// TestRiskPassedJoinsTheHistoryWithoutTouchingTheRow: the edge's
// RISK_PASSED may be written after the ticket's later states; it takes its
// place in the history by its time and leaves the row's status alone.
func TestRiskPassedJoinsTheHistoryWithoutTouchingTheRow(t *testing.T) {
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "log.db")
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w := New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 8)
	checked := time.Now().Add(-time.Second)
	m := &sale.Message{RequestNo: "r1", ActivityID: 1, SKUID: 2, UserID: 3, Quantity: 1}
	w.Record(m, "FAILED", "compensated: released")
	w.Close() // the row first, then the late step
	w = New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 8)
	w.RiskPassed("r1", checked, "risk service: allow")
	w.Close()
	evs, err := st.RequestEvents(context.Background(), "r1")
	if err != nil || len(evs) != 2 || evs[0].Status != store.StatusRiskPassed || evs[0].Remark != "risk service: allow" ||
		evs[0].At.UnixMilli() != checked.UnixMilli() || evs[1].Status != "FAILED" {
		t.Fatalf("history of r1: %+v, %v", evs, err)
	}
	e, err := st.RequestLog(context.Background(), "r1")
	if err != nil || e.Status != "FAILED" {
		t.Fatalf("request log of r1: %+v, %v", e, err)
	}
}

// TestRefusalsFoldAndCountsAddUp: refused attempts become REJECTED rows of
// their buyer (one per buyer, activity, SKU and reason in a write, counting
// the repeats), found by the buyer; free-rejection counts of one minute
// add up.
func TestRefusalsFoldAndCountsAddUp(t *testing.T) {
	st := openStore(t)
	w := New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 64)
	w.Refused(7, 70, 42, 1, "DUPLICATE", "7-70-123", "trace-1")
	w.Refused(7, 70, 43, 1, "SOLD_OUT", "", "trace-2")
	w.Close()
	w = New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 64)
	// Refusals queued before the writer runs its next batch are folded.
	for range 3 {
		w.Refused(7, 71, 42, 2, "RISK_REJECTED", "", "trace-3")
	}
	minute := time.Now()
	w.Rejected(7, 70, "sold_out", minute, 5)
	w.Rejected(7, 70, "sold_out", minute, 6)
	w.Rejected(7, 70, "sold_out", minute, 0)
	w.Close()
	es, _, err := st.UserRequests(context.Background(), 42, 7, store.RequestCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	var risk, dup int
	for _, e := range es {
		if e.Status != store.StatusRejected || e.UserID != 42 || len(e.RequestNo) < 3 || e.RequestNo[:2] != "R-" {
			t.Fatalf("refusal row %+v", e)
		}
		switch {
		case e.SKUID == 71 && e.Remark[:13] == "RISK_REJECTED":
			risk++
		case e.SKUID == 70 && e.Remark == "DUPLICATE: 7-70-123" && e.TraceID == "trace-1":
			dup++
		}
	}
	if dup != 1 || risk < 1 || risk > 3 {
		t.Fatalf("user 42's rows: %+v", es)
	}
	cs, err := st.Rejections(context.Background(), 7, minute)
	if err != nil || len(cs) != 1 || cs[0].N != 11 || cs[0].Reason != "sold_out" {
		t.Fatalf("counts %+v, %v", cs, err)
	}
}

// TestStalledDatabaseNeverSlowsTheCaller: while another connection holds
// SQLite's write lock (the database stalls every write), Refused, Record
// and Rejected return at once; what does not fit is dropped and counted;
// once the lock is gone what was queued is written.
func TestStalledDatabaseNeverSlowsTheCaller(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "log.db")
	cfg := store.DefaultConfig()
	cfg.DSN, cfg.BusyTimeout = dsn, 300*time.Millisecond
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lock, err := sql.Open("sqlite", "file:"+dsn+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO seckill_reject_minute VALUES (1, 1, 'x', 0, 1)`); err != nil {
		t.Fatal(err)
	}
	w := New(st, zaptest.NewLogger(t), prometheus.NewRegistry(), 16)
	start := time.Now()
	const n = 5000
	for i := range n {
		w.Refused(9, 90, int64(i%50+1), 1, "SOLD_OUT", "", "")
		w.Record(&sale.Message{RequestNo: "c" + strconv.Itoa(i), ActivityID: 9, SKUID: 90, UserID: 1, Quantity: 1},
			"COMPENSATING", "produce failed")
		w.Rejected(9, 90, "not_open", time.Now(), 1)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("%d calls took %v with the database stalled", 3*n, took)
	}
	var dropped dto.Metric
	_ = w.steps.WithLabelValues("dropped").Write(&dropped)
	if dropped.GetCounter().GetValue() < n {
		t.Fatalf("dropped %v of %d steps while stalled", dropped.GetCounter().GetValue(), 2*n)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	cs, err := st.Rejections(context.Background(), 9, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, c := range cs {
		total += c.N
	}
	if total != n {
		t.Fatalf("not_open counted %d, want %d (counts are added up, not queued)", total, n)
	}
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	cfg := store.DefaultConfig()
	cfg.DSN = filepath.Join(t.TempDir(), "log.db")
	st, err := store.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
