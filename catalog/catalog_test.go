package catalog

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func act(id, sku int64, start, end time.Time) sale.Activity {
	return sale.Activity{ID: id, Start: start, End: end, State: sale.StateOnline, SKUs: []sale.SKU{{ID: sku, Stock: 1, LimitPerUser: 1}}}
}

func TestCurrentPicksTheOpenThenTheNextThenTheLast(t *testing.T) {
	r := testenv.StartRedis(t)
	c := New(r.Client(t))
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	for _, a := range []sale.Activity{
		act(1, 10, t0, t0.Add(time.Hour)),
		act(2, 10, t0.Add(2*time.Hour), t0.Add(3*time.Hour)),
	} {
		if err := c.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		at   time.Time
		want int64
	}{
		{"before every window the first to start", t0.Add(-time.Minute), 1},
		{"inside the first window the first", t0.Add(time.Minute), 1},
		{"between windows the next to start", t0.Add(90 * time.Minute), 2},
		{"after every window the last", t0.Add(4 * time.Hour), 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, k, ok := c.Current(10, tc.at)
			if !ok || a.ID != tc.want || k.ID != 10 {
				t.Fatalf("got %v %v %v, want activity %d", a, k, ok, tc.want)
			}
		})
	}
	// A second catalog over the same Redis sees the same after Load.
	c2 := New(r.Client(t))
	if err := c2.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c2.Activities()) != 2 {
		t.Fatalf("loaded %d activities", len(c2.Activities()))
	}
	if _, _, ok := c2.Current(99, t0); ok {
		t.Fatal("an unknown sku resolved")
	}
}

func TestLoadNeverUndoesAConcurrentPut(t *testing.T) {
	r := testenv.StartRedis(t)
	c := New(r.Client(t))
	ctx := context.Background()
	now := time.Now()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				_ = c.Load(ctx)
			}
		}
	}()
	for id := int64(1); id <= 200; id++ {
		if err := c.Put(ctx, act(id, 1000+id, now, now.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Activity(id); !ok {
			close(stop)
			wg.Wait()
			t.Fatalf("activity %d vanished right after its Put", id)
		}
	}
	close(stop)
	wg.Wait()
}

// A Redis that lost the catalog (restart without persistence, FLUSHALL) is
// not a sale taken down — nothing removes an activity — so the snapshot
// keeps what Redis lost, and still takes what Redis holds.
func TestLoadKeepsWhatRedisLost(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	c := New(rdb)
	ctx := context.Background()
	now := time.Now()
	for _, a := range []sale.Activity{act(1, 11, now, now.Add(time.Hour)), act(2, 22, now, now.Add(time.Hour))} {
		if err := c.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Do(ctx, rdb.B().Flushall().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if len(c.Activities()) != 2 {
		t.Fatalf("after FLUSHALL the snapshot holds %d activities, want both", len(c.Activities()))
	}
	if _, _, ok := c.Current(11, now.Add(time.Minute)); !ok {
		t.Fatal("sku 11 unknown after FLUSHALL")
	}
	// Another process puts activity 2 back with a second SKU, and activity
	// 3; activity 1's entry is lost while its id stays in the set.
	other := New(rdb)
	a2 := act(2, 22, now, now.Add(time.Hour))
	a2.SKUs = append(a2.SKUs, sale.SKU{ID: 23, Stock: 1, LimitPerUser: 1})
	for _, a := range []sale.Activity{act(1, 11, now, now.Add(time.Hour)), a2, act(3, 33, now, now.Add(time.Hour))} {
		if err := other.Put(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := rdb.Do(ctx, rdb.B().Del().Key(sale.ActivityKey(1)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ act, sku int64 }{{1, 11}, {2, 22}, {2, 23}, {3, 33}} {
		if _, _, ok := c.Lookup(l.act, l.sku); !ok {
			t.Errorf("activity %d sku %d missing after Load", l.act, l.sku)
		}
	}
	if len(c.Activities()) != 3 {
		t.Fatalf("%d activities, want 3", len(c.Activities()))
	}
}

// Remember teaches an empty snapshot (a process started after Redis lost
// the catalog) the database's activities, in memory only; an activity the
// snapshot knows from Redis keeps Redis's copy; Load keeps what Remember
// added while Redis still lacks it.
func TestRememberAddsWhatTheSnapshotLacks(t *testing.T) {
	r := testenv.StartRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	now := time.Now()
	inRedis := act(1, 11, now, now.Add(time.Hour))
	inRedis.State = sale.StateOffline // on-call's latest change, Redis only
	c := New(rdb)
	if err := c.Put(ctx, inRedis); err != nil {
		t.Fatal(err)
	}
	c.Remember([]sale.Activity{act(1, 11, now, now.Add(time.Hour)), act(2, 22, now, now.Add(time.Hour))})
	if a, ok := c.Activity(1); !ok || a.State != sale.StateOffline {
		t.Fatalf("activity 1 %+v %v: Remember replaced Redis's copy", a, ok)
	}
	if _, _, ok := c.Current(22, now.Add(time.Minute)); !ok {
		t.Fatal("sku 22 unknown after Remember")
	}
	if n, err := rdb.Do(ctx, rdb.B().Exists().Key(sale.ActivityKey(2)).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("Remember wrote activity 2 to Redis (%d, %v): the watcher must see the loss", n, err)
	}
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Activity(2); !ok {
		t.Fatal("Load forgot a remembered activity Redis still lacks")
	}
}

// TestUpdateChangesOneActivityForEveryReader: a live switch (the risk
// policy) reaches another process's catalog on its next load, and the
// snapshot a reader already holds is not changed under it.
func TestUpdateChangesOneActivityForEveryReader(t *testing.T) {
	r := testenv.StartRedis(t)
	ctx := context.Background()
	writer, reader := New(r.Client(t)), New(r.Client(t))
	t0 := time.Unix(1_800_000_000, 0)
	if err := writer.Put(ctx, act(1, 10, t0, t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := reader.Load(ctx); err != nil {
		t.Fatal(err)
	}
	held, _ := reader.Activity(1)
	got, err := writer.Update(ctx, 1, func(a *sale.Activity) { a.RiskOnError = sale.RiskDeny })
	if err != nil || got.RiskOnError != sale.RiskDeny || len(got.SKUs) != 1 {
		t.Fatalf("update: %+v, %v", got, err)
	}
	if held.RiskOnError != "" {
		t.Fatal("the update changed a snapshot a reader holds")
	}
	if err := reader.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if a, _ := reader.Activity(1); a.RiskOnError != sale.RiskDeny || a.State != sale.StateOnline {
		t.Fatalf("reader after load: %+v", a)
	}
	if _, err := writer.Update(ctx, 2, func(*sale.Activity) {}); !errors.Is(err, ErrUnknownActivity) {
		t.Fatalf("update of an unknown activity: %v", err)
	}
}

// TestReservedFollowsTheActivity: the reserved set answers per activity,
// and an update of the list (a Put) replaces it.
func TestReservedFollowsTheActivity(t *testing.T) {
	r := testenv.StartRedis(t)
	c := New(r.Client(t))
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	a := act(1, 10, t0, t0.Add(time.Hour))
	a.ReservedUsers = []int64{5, 6}
	b := act(2, 20, t0, t0.Add(time.Hour))
	for _, x := range []sale.Activity{a, b} {
		if err := c.Put(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if !c.Reserved(1, 5) || !c.Reserved(1, 6) || c.Reserved(1, 7) || c.Reserved(2, 5) || c.Reserved(3, 5) {
		t.Fatal("reserved lookups do not follow the lists")
	}
	a.ReservedUsers = []int64{7}
	if err := c.Put(ctx, a); err != nil {
		t.Fatal(err)
	}
	if c.Reserved(1, 5) || !c.Reserved(1, 7) {
		t.Fatal("the reserved set did not follow the new list")
	}
}
