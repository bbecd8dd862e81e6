package catalog

import (
	"context"
	"sync"
	"testing"
	"time"

	"seckill/internal/sale"
	"seckill/internal/testenv"
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
