package reqlog

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"seckill/internal/sale"
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
