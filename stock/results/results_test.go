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
		r, err := s.Read(ctx, 0, e.RequestNo)
		if err != nil || r != e {
			t.Errorf("Read(%s) = %+v %v, want %+v", e.RequestNo, r, err, e)
		}
	}
	many, err := s.ReadMany(ctx, []string{"7-1001-13", "not-a-ticket", "7-7001-12", "7-7001-99"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{es[2], {RequestNo: "not-a-ticket"}, es[1], {RequestNo: "7-7001-99"}}
	if fmt.Sprint(many) != fmt.Sprint(want) {
		t.Errorf("ReadMany %+v\nwant %+v", many, want)
	}
	for _, rn := range []string{"7-7001-99", "12", "sk:r:12", ""} {
		if _, err := s.Read(ctx, 1, rn); !errors.Is(err, ErrNotFound) {
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
	for _, user := range []int64{0, 1} {
		if _, err := s.Read(dctx, user, es[0].RequestNo); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("a read as user %d from a stopped shard: %v, want an error", user, err)
		}
	}
	if _, err := s.ReadMany(dctx, []string{es[0].RequestNo}, []int64{1}); err == nil {
		t.Error("a read of many from a stopped shard succeeded")
	}
}

// TestQueuingIsTheBuyersRecord: a ticket the engine accepted has no result
// field; its QUEUING is the record of the SKU's users hash (userId ->
// requestNo) that the occupy script writes. Read and ReadMany, told the
// owner, answer QUEUING where the record names the ticket and no final
// result is written — WAITING included (a queued attempt the line
// occupied) — and nothing for anyone else, a record naming another ticket,
// or no owner told; a final result stands whatever the record says. A
// bucket's ticket reads its bucket's record. Read marks a QUEUING the
// consumer claimed (Entry.Claimed: the database may know its end).
func TestQueuingIsTheBuyersRecord(t *testing.T) {
	r := testenv.StartRedis(t)
	c := r.Client(t)
	s := New(c, nil, time.Hour)
	ctx := context.Background()
	const (
		queuing = "7-1001-1"   // user 1's record names it, no field
		waiting = "7-1001-2"   // user 2's record names it, WAITING field
		lined   = "7-1001-3"   // WAITING field, user 3's record names another ticket
		done    = "7-1001-4"   // user 4's record names it, SUCCESS field
		bucket  = "7-1001.2-5" // bucket 2's record of user 5 names it
	)
	users := map[string]map[string]string{
		"sk:{a7:s1001}:users":    {"1": queuing, "2": waiting, "3": "7-1001-9", "4": done},
		"sk:{a7:s1001:b2}:users": {"5": bucket},
	}
	for key, m := range users {
		for u, rn := range m {
			r.Do(t, "HSET", key, u, rn)
		}
	}
	r.Do(t, "SADD", "sk:{a7:s1001}:claimed", queuing, done)
	if err := s.Write(ctx, Entry{RequestNo: waiting, Owner: 2, State: sale.ResultWaiting, Code: "0:7"},
		Entry{RequestNo: lined, Owner: 3, State: sale.ResultWaiting, Code: "0:8"},
		Entry{RequestNo: done, Owner: 4, State: sale.ResultSuccess, OrderNo: "O" + done}); err != nil {
		t.Fatal(err)
	}
	q := func(rn string, user int64) Entry {
		e := Entry{RequestNo: rn, Owner: user, State: sale.ResultQueuing}
		e.Activity, e.SKU, _, _ = sale.ParseRequestNo(rn)
		return e
	}
	w := func(rn string, user int64, code string) Entry {
		return Entry{RequestNo: rn, Activity: 7, SKU: 1001, Owner: user, State: sale.ResultWaiting, Code: code}
	}
	claimed := func(e Entry) Entry { e.Claimed = true; return e }
	success := Entry{RequestNo: done, Activity: 7, SKU: 1001, Owner: 4, State: sale.ResultSuccess, OrderNo: "O" + done}
	for _, c := range []struct {
		rn   string
		user int64
		want Entry // State "": not found
	}{
		{queuing, 1, claimed(q(queuing, 1))},
		{queuing, 2, Entry{}},
		{queuing, 0, Entry{}},
		{waiting, 2, q(waiting, 2)},
		{waiting, 0, w(waiting, 2, "0:7")},
		{lined, 3, w(lined, 3, "0:8")},
		{done, 4, success},
		{done, 0, success},
		{bucket, 5, q(bucket, 5)},
		{bucket, 1, Entry{}},
	} {
		got, err := s.Read(ctx, c.user, c.rn)
		if c.want.State == "" {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Read(%d, %s) = %+v %v, want not found", c.user, c.rn, got, err)
			}
		} else if err != nil || got != c.want {
			t.Errorf("Read(%d, %s) = %+v %v, want %+v", c.user, c.rn, got, err, c.want)
		}
	}
	rns := []string{queuing, waiting, lined, done, bucket, queuing, "not-a-ticket"}
	many, err := s.ReadMany(ctx, rns, []int64{1, 2, 3, 4, 5, 9, 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{q(queuing, 1), q(waiting, 2), w(lined, 3, "0:8"), success, q(bucket, 5), {RequestNo: queuing}, {RequestNo: "not-a-ticket"}}
	if fmt.Sprint(many) != fmt.Sprint(want) {
		t.Errorf("ReadMany %+v\nwant %+v", many, want)
	}
	if _, err := s.ReadMany(ctx, rns, []int64{1}); err == nil {
		t.Error("ReadMany with fewer users than tickets succeeded")
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
