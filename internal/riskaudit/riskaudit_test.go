package riskaudit

import (
	"context"
	"testing"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestRecordsArePendingUntilResolved: records are pending oldest first,
// a resolved one leaves the pending set and keeps its outcome, a pending
// entry whose record is gone is dropped, and both keys expire.
func TestRecordsArePendingUntilResolved(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	for i, rn := range []string{"1-1-b", "1-1-a", "1-1-c"} {
		if err := Add(ctx, rdb, Record{RequestNo: rn, User: int64(i + 1), Why: "open", At: int64(10 - i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{RecordsKey, PendingKey} {
		ttl, err := rdb.Do(ctx, rdb.B().Ttl().Key(k).Build()).AsInt64()
		if err != nil || ttl <= 0 {
			t.Fatalf("%s ttl %d (%v), want it to expire", k, ttl, err)
		}
	}
	got, err := Oldest(ctx, rdb, 2)
	if err != nil || len(got) != 2 || got[0].RequestNo != "1-1-c" || got[1].RequestNo != "1-1-a" || got[0].State != Pending {
		t.Fatalf("oldest 2: %+v %v", got, err)
	}
	got[0].State, got[0].Action = Denied, "flagged"
	if err := Resolve(ctx, rdb, got[0]); err != nil {
		t.Fatal(err)
	}
	if err := Resolve(ctx, rdb, Record{RequestNo: "1-1-a", State: Pending}); err == nil {
		t.Fatal("resolved to pending")
	}
	if err := r.Do(t, "HDEL", RecordsKey, "1-1-a").Error(); err != nil {
		t.Fatal(err)
	}
	got, err = Oldest(ctx, rdb, 10)
	if err != nil || len(got) != 1 || got[0].RequestNo != "1-1-b" {
		t.Fatalf("pending after a resolve and a lost record: %+v %v", got, err)
	}
	if n, err := rdb.Do(ctx, rdb.B().Zcard().Key(PendingKey).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("pending set %d (%v), want the lost record dropped", n, err)
	}
	denied, total, err := List(ctx, rdb, Denied, 10)
	if err != nil || total != 2 || len(denied) != 1 || denied[0].Action != "flagged" {
		t.Fatalf("denied: %+v total %d %v", denied, total, err)
	}
}
