package results

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
	"seckill/sale"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestResultsLiveOnTheirSKUsShard: each result is written on the shard
// the router names for the SKU its requestNo names, as the requestNo's
// field of sk:{a<activity>:s<sku>}:r (with the TTL); it is read back by
// the requestNo alone, singly and many at once across shards; a requestNo
// that is not a ticket number is not found without a lookup; and the final
// results are named once on sk:results on the default Redis.
func TestResultsLiveOnTheirSKUsShard(t *testing.T) {
	def, hot := testenv.StartRedis(t), testenv.StartRedis(t)
	dc, hc := def.Client(t), hot.Client(t)
	route := func(activity, sku int64, _ int) rueidis.Client {
		if sku == 7001 {
			return hc
		}
		return dc
	}
	s := New(dc, route, time.Hour)
	ctx := context.Background()
	sub := def.Client(t)
	got := make(chan string, 4)
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = sub.Receive(subCtx, sub.B().Subscribe().Channel(Channel).Build(), func(m rueidis.PubSubMessage) { got <- m.Message })
	}()
	testenv.Eventually(t, "the subscription", 5*time.Second, func() bool {
		v, err := def.Do(t, "PUBSUB", "NUMSUB", Channel).ToArray() // [channel, count]
		if err != nil || len(v) != 2 {
			return false
		}
		n, err := v[1].AsInt64()
		return err == nil && n == 1
	})
	es := []Entry{
		{RequestNo: "7-7001-11", Activity: 7, SKU: 7001, Owner: 1, State: sale.ResultQueuing},
		{RequestNo: "7-7001-12", Activity: 7, SKU: 7001, Owner: 2, State: sale.ResultSuccess, OrderNo: "O7-7001-12"},
		{RequestNo: "7-1001-13", Activity: 7, SKU: 1001, Owner: 3, State: sale.ResultFail, Code: sale.FailReleased},
	}
	if err := s.Write(ctx, es...); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		// The documented name and form (DESIGN §5): a field of the
		// SKU's results hash, STATE|owner|orderNo|code.
		key := fmt.Sprintf("sk:{a%d:s%d}:r", e.Activity, e.SKU)
		own, other := def, hot
		if e.SKU == 7001 {
			own, other = hot, def
		}
		want := fmt.Sprintf("%s|%d|%s|%s", e.State, e.Owner, e.OrderNo, e.Code)
		if v := own.Str(t, "HGET", key, e.RequestNo); v != want {
			t.Errorf("%s %s on its shard: %q, want %q", key, e.RequestNo, v, want)
		}
		if n := other.Int(t, "EXISTS", key); n != 0 {
			t.Errorf("%s on the other Redis", key)
		}
		if ttl := own.Int(t, "TTL", key); ttl <= 3500 || ttl > 3600 {
			t.Errorf("%s TTL %d s, want an hour", key, ttl)
		}
		r, err := s.Read(ctx, e.RequestNo)
		if err != nil || r != e {
			t.Errorf("Read(%s) = %+v %v, want %+v", e.RequestNo, r, err, e)
		}
	}
	many, err := s.ReadMany(ctx, []string{"7-1001-13", "not-a-ticket", "7-7001-12", "7-7001-99"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{es[2], {RequestNo: "not-a-ticket"}, es[1], {RequestNo: "7-7001-99"}}
	if fmt.Sprint(many) != fmt.Sprint(want) {
		t.Errorf("ReadMany %+v\nwant %+v", many, want)
	}
	for _, rn := range []string{"7-7001-99", "12", "sk:r:12", ""} {
		if _, err := s.Read(ctx, rn); !errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%q): %v, want not found", rn, err)
		}
	}
	select {
	case m := <-got:
		if m != "7-7001-12 7-1001-13" {
			t.Errorf("published %q, want the final results", m)
		}
	case <-time.After(5 * time.Second):
		t.Error("no PUBLISH on sk:results")
	}
	// A shard that is down fails the write and the read (the client
	// retries a read until its context ends).
	hot.Stop()
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	defer dcancel()
	if err := s.Write(dctx, es[0]); err == nil {
		t.Error("a write to a stopped shard succeeded")
	}
	if _, err := s.Read(dctx, es[0].RequestNo); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("a read from a stopped shard: %v, want an error", err)
	}
}

// BenchmarkWrite500 writes a consumer batch's 500 final results of one SKU
// (one HSET, one PUBLISH): its allocations are per batch, not per result.
func BenchmarkWrite500(b *testing.B) {
	r := testenv.StartRedis(b)
	c := r.Client(b)
	s := New(c, func(int64, int64, int) rueidis.Client { return c }, time.Hour)
	es := make([]Entry, 500)
	for i := range es {
		rn := fmt.Sprintf("7-7001-%d", i)
		es[i] = Entry{RequestNo: rn, Activity: 7, SKU: 7001, Owner: int64(i), State: sale.ResultSuccess, OrderNo: "O" + rn}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Write(ctx, es...); err != nil {
			b.Fatal(err)
		}
	}
}
