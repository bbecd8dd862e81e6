//go:build unix

package store

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"seckill/sale"
)

// benchBatches runs batches of size fresh tickets (one SKU with stock for
// all of them) through save on a SQLite store, one batch per iteration.
func benchBatches(b *testing.B, size int, save func(s Store, msgs []sale.Message) error) {
	benchBatchesOn(b, filepath.Join(b.TempDir(), "bench.db"), size, save)
}

// benchBatchesOn is benchBatches on the SQLite file of dsn.
func benchBatchesOn(b *testing.B, dsn string, size int, save func(s Store, msgs []sale.Message) error) {
	cfg := DefaultConfig()
	cfg.DSN = dsn
	s, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.PutActivity(context.Background(), activity(1, sale.SKU{ID: 10, Stock: 1 << 40})); err != nil {
		b.Fatal(err)
	}
	rns := sale.NewRequestNos(1)
	msgs := make([]sale.Message, size)
	user := int64(0)
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		for i := range msgs {
			user++
			msgs[i] = msg(rns.Next(1, 10), 1, 10, user)
		}
		if err := save(s, msgs); err != nil {
			b.Fatal(err)
		}
	}
	// CPU time, not wall time: the commit's fsync waits for the disk, and
	// the machine is shared.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N*size), "cpu-ns/ticket")
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// saveThenLog is the consumer's older write: the batch, then the
// SUCCESS steps of its new orders in a transaction of their own.
func saveThenLog(s Store, msgs []sale.Message) error {
	ctx := context.Background()
	out, err := s.SaveBatch(ctx, msgs)
	if err != nil {
		return err
	}
	es := make([]LogEntry, 0, len(out))
	for i, o := range out {
		if o.Kind == Created {
			m := &msgs[i]
			es = append(es, LogEntry{RequestNo: m.RequestNo, ActivityID: m.ActivityID, SKUID: m.SKUID, UserID: m.UserID,
				Quantity: m.Quantity, Status: StatusSuccess, OrderNo: o.OrderNo, TraceID: m.TraceID, Remark: "result written"})
		}
	}
	return s.LogRequests(ctx, es)
}

func saveDelivered(s Store, msgs []sale.Message) error {
	_, err := s.SaveBatch(context.Background(), msgs, Delivered("result written"))
	return err
}

func BenchmarkSaveThenLog(b *testing.B) {
	for _, n := range []int{35, 500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchBatches(b, n, saveThenLog) })
	}
}

func BenchmarkSaveDelivered(b *testing.B) {
	for _, n := range []int{35, 500, 2000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchBatches(b, n, saveDelivered) })
	}
}

// BenchmarkSaveDeliveredPragma is BenchmarkSaveDelivered under other
// SQLite settings than the store's (bench/results/accept.md):
// synchronous=NORMAL — in WAL mode a commit no longer waits for its fsync
// (the WAL is synced at checkpoints), which an OS crash or power loss can
// undo after the consumer committed the batch's offsets; and a WAL
// checkpointed every 10,000 pages instead of 1,000.
func BenchmarkSaveDeliveredPragma(b *testing.B) {
	for _, p := range []string{"synchronous(NORMAL)", "wal_autocheckpoint(10000)"} {
		for _, n := range []int{35, 500} {
			b.Run(fmt.Sprintf("%s/%d", p, n), func(b *testing.B) {
				benchBatchesOn(b, filepath.Join(b.TempDir(), "bench.db")+"?_pragma="+p, n, saveDelivered)
			})
		}
	}
}
