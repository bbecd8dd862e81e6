package stock

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// TestBatchScriptAgainstHandComputedBatches checks the occupy script
// (occupy_batch.lua, the one definition of the occupy rules: one buyer is a
// batch of one) against expectations worked out by hand from its documented
// rules (the header of lua/occupy_batch.lua and README "The life of a
// ticket": the user × SKU window first, then status and window, then the
// user's record, then the per-user limit, then the on-call mark and the
// stock) — the oracle for single and batched occupy alike, which no longer
// have two scripts to compare. Codes are the documented strings, and the
// books — stock, sold, users, the pending journal, the attempt counters and
// every buyer's result — are read from Redis by the key names of DESIGN §5.
func TestBatchScriptAgainstHandComputedBatches(t *testing.T) {
	const a, b, c, d = 1, 2, 3, 4 // buyers
	type want struct {
		code      string
		remaining int64
		holder    string
	}
	now := time.Now()
	tests := []struct {
		name         string
		stock, limit int64
		tweak        func(*sale.Activity)
		window       int     // user × SKU attempts per hour (0: off), for both calls
		before       []Buyer // an earlier call's buyers, all OK
		mark         bool    // the on-call sold-out mark, set after before
		buyers       []Buyer
		want         []want
		remaining    int64             // the stock key after the call
		sold         int64             // the sold key
		users        map[int64]string  // the users hash: userId -> requestNo
		pending      []string          // the tickets the pending entry names, "userId:requestNo"
		units        map[string]string // the qty hash (limit > 1): requestNo -> units
		counts       map[int64]string  // the window's hash (window on): userId -> attempts
		stale        map[int64]string  // attempts already in the previous window's hash
		prior        map[int64]string  // attempts set in this window's hash after before
	}{
		{
			name:  "stock 3 sells to a, b and c; a's second ticket is a duplicate of its first; d finds it sold out",
			stock: 3, limit: 1,
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}, {a, "ra2", 1}, {c, "rc", 1}, {d, "rd", 1}},
			want:      []want{{"OK", 2, "ra"}, {"OK", 1, "rb"}, {"DUPLICATE", -1, "ra"}, {"OK", 0, "rc"}, {"SOLD_OUT", 0, ""}},
			remaining: 0, sold: 3, users: map[int64]string{a: "ra", b: "rb", c: "rc"},
			pending: []string{"1:ra", "2:rb", "3:rc"},
		},
		{
			name:  "a quantity above the per-user limit takes nothing and does not bar the buyer's next ticket",
			stock: 10, limit: 2,
			buyers:    []Buyer{{a, "ra", 3}, {b, "rb", 2}, {a, "ra2", 1}, {c, "rc", 5}},
			want:      []want{{"OVER_LIMIT", -1, ""}, {"OK", 8, "rb"}, {"OK", 7, "ra2"}, {"OVER_LIMIT", -1, ""}},
			remaining: 7, sold: 3, users: map[int64]string{b: "rb", a: "ra2"},
			pending: []string{"1:ra2", "2:rb"},
			units:   map[string]string{"rb": "2", "ra2": "1"},
		},
		{
			name:  "a quantity below one (0 or negative) is over the limit, takes nothing and does not bar the buyer",
			stock: 5, limit: 2,
			buyers:    []Buyer{{a, "ra", 0}, {b, "rb", -1}, {a, "ra2", 1}},
			want:      []want{{"OVER_LIMIT", -1, ""}, {"OVER_LIMIT", -1, ""}, {"OK", 4, "ra2"}},
			remaining: 4, sold: 1, users: map[int64]string{a: "ra2"},
			pending: []string{"1:ra2"},
			units:   map[string]string{"ra2": "1"},
		},
		{
			name:  "a quantity above what remains is sold out, and a smaller one after it still fits",
			stock: 4, limit: 3,
			buyers:    []Buyer{{a, "ra", 3}, {b, "rb", 2}, {c, "rc", 1}, {d, "rd", 1}},
			want:      []want{{"OK", 1, "ra"}, {"SOLD_OUT", 1, ""}, {"OK", 0, "rc"}, {"SOLD_OUT", 0, ""}},
			remaining: 0, sold: 4, users: map[int64]string{a: "ra", c: "rc"},
			pending: []string{"1:ra", "3:rc"},
			units:   map[string]string{"ra": "3", "rc": "1"},
		},
		{
			name:  "a buyer holding a ticket from an earlier call is a duplicate of it, even over the limit",
			stock: 5, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			buyers:    []Buyer{{a, "ra", 2}, {b, "rb", 1}, {b, "rb2", 1}},
			want:      []want{{"DUPLICATE", -1, "r0"}, {"OK", 3, "rb"}, {"DUPLICATE", -1, "rb"}},
			remaining: 3, sold: 2, users: map[int64]string{a: "r0", b: "rb"},
			pending: []string{"1:r0", "2:rb"},
		},
		{
			name:  "the on-call mark sells nothing with stock left; a duplicate and an over-limit keep their codes",
			stock: 5, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			mark:      true,
			buyers:    []Buyer{{b, "rb", 1}, {a, "ra", 1}, {c, "rc", 2}},
			want:      []want{{"SOLD_OUT", 0, ""}, {"DUPLICATE", -1, "r0"}, {"OVER_LIMIT", -1, ""}},
			remaining: 4, sold: 1, users: map[int64]string{a: "r0"},
			pending: []string{"1:r0"},
		},
		{
			name:  "one buyer alone takes its units, recorded where the limit is above one",
			stock: 5, limit: 2,
			buyers:    []Buyer{{a, "ra", 2}},
			want:      []want{{"OK", 3, "ra"}},
			remaining: 3, sold: 2, users: map[int64]string{a: "ra"},
			pending: []string{"1:ra"},
			units:   map[string]string{"ra": "2"},
		},
		{
			name:  "one buyer alone who holds a ticket is a duplicate of it",
			stock: 5, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			buyers:    []Buyer{{a, "ra", 1}},
			want:      []want{{"DUPLICATE", -1, "r0"}},
			remaining: 4, sold: 1, users: map[int64]string{a: "r0"},
			pending: []string{"1:r0"},
		},
		{
			name:  "one buyer alone takes the last unit; the next finds it sold out",
			stock: 1, limit: 1,
			before:    []Buyer{{a, "r0", 1}},
			buyers:    []Buyer{{b, "rb", 1}},
			want:      []want{{"SOLD_OUT", 0, ""}},
			remaining: 0, sold: 1, users: map[int64]string{a: "r0"},
			pending: []string{"1:r0"},
		},
		{
			name:  "before the window opens nothing sells, a buyer named twice included",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.Start, x.End = now.Add(time.Hour), now.Add(2*time.Hour) },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}, {a, "ra2", 1}},
			want:      []want{{"NOT_OPEN", -1, ""}, {"NOT_OPEN", -1, ""}, {"NOT_OPEN", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
		{
			name:  "after the window ends nothing sells",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.Start, x.End = now.Add(-2*time.Hour), now.Add(-time.Second) },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"ENDED", -1, ""}, {"ENDED", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
		{
			name:  "the window counts every attempt first: a's third is rate-limited before its duplicate is judged; the attempts that took a ticket are not stored",
			stock: 5, limit: 1, window: 2,
			buyers:    []Buyer{{a, "ra", 1}, {a, "ra2", 1}, {b, "rb", 1}, {a, "ra3", 1}},
			want:      []want{{"OK", 4, "ra"}, {"DUPLICATE", -1, "ra"}, {"OK", 3, "rb"}, {"RATE_LIMITED", -1, ""}},
			remaining: 3, sold: 2, users: map[int64]string{a: "ra", b: "rb"},
			pending: []string{"1:ra", "2:rb"},
			counts:  map[int64]string{a: "2"},
		},
		{
			name:  "an earlier call's attempt that took a ticket does not count: a's next is a duplicate; over the window b is rate-limited though stock is left",
			stock: 5, limit: 1, window: 1,
			before:    []Buyer{{a, "r0", 1}},
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}, {b, "rb2", 1}},
			want:      []want{{"DUPLICATE", -1, "r0"}, {"OK", 3, "rb"}, {"RATE_LIMITED", -1, ""}},
			remaining: 3, sold: 2, users: map[int64]string{a: "r0", b: "rb"},
			pending: []string{"1:r0", "2:rb"},
			counts:  map[int64]string{a: "1", b: "1"},
		},
		{
			name:  "attempts already counted in this window count: every buyer over the window, nothing but the counts changes",
			stock: 5, limit: 1, window: 1,
			before:    []Buyer{{a, "r0", 1}},
			prior:     map[int64]string{a: "1"},
			buyers:    []Buyer{{a, "ra", 1}, {a, "ra2", 1}},
			want:      []want{{"RATE_LIMITED", -1, ""}, {"RATE_LIMITED", -1, ""}},
			remaining: 4, sold: 1, users: map[int64]string{a: "r0"},
			pending: []string{"1:r0"},
			counts:  map[int64]string{a: "3"},
		},
		{
			name:  "before the window opens an attempt still counts, and one over the window is rate-limited",
			stock: 5, limit: 1, window: 1,
			tweak:     func(x *sale.Activity) { x.Start, x.End = now.Add(time.Hour), now.Add(2*time.Hour) },
			buyers:    []Buyer{{a, "ra", 1}, {a, "ra2", 1}, {b, "rb", 1}},
			want:      []want{{"NOT_OPEN", -1, ""}, {"RATE_LIMITED", -1, ""}, {"NOT_OPEN", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
			counts: map[int64]string{a: "2", b: "1"},
		},
		{
			name:  "a buyer named three times in one batch is counted as it comes: the third is over a window of two; the ticket's attempt is then taken off",
			stock: 5, limit: 2, window: 2,
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}, {a, "ra2", 1}, {a, "ra3", 1}},
			want:      []want{{"OK", 4, "ra"}, {"OK", 3, "rb"}, {"DUPLICATE", -1, "ra"}, {"RATE_LIMITED", -1, ""}},
			remaining: 3, sold: 2, users: map[int64]string{a: "ra", b: "rb"},
			pending: []string{"1:ra", "2:rb"},
			units:   map[string]string{"ra": "1", "rb": "1"},
			counts:  map[int64]string{a: "2"},
		},
		{
			name:  "the previous window's attempts do not count in this one, and its hash is left as it was; buyers who all take a ticket write no count",
			stock: 5, limit: 1, window: 1,
			stale:     map[int64]string{a: "7", c: "1"},
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"OK", 4, "ra"}, {"OK", 3, "rb"}},
			remaining: 3, sold: 2, users: map[int64]string{a: "ra", b: "rb"},
			pending: []string{"1:ra", "2:rb"},
		},
		{
			name:  "an offline activity sells nothing inside its window",
			stock: 5, limit: 1,
			tweak:     func(x *sale.Activity) { x.State = sale.StateOffline },
			buyers:    []Buyer{{a, "ra", 1}, {b, "rb", 1}},
			want:      []want{{"NOT_OPEN", -1, ""}, {"NOT_OPEN", -1, ""}},
			remaining: 5, sold: 0, users: map[int64]string{},
		},
	}
	r := newRig(t)
	rdb := r.def.Client(t)
	ctx := context.Background()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			act := activity(int64(100+i), int64(1000+i), tc.stock, false)
			act.SKUs[0].LimitPerUser = tc.limit
			if tc.tweak != nil {
				tc.tweak(&act)
			}
			pa, k := r.preheat(t, act)
			x := Extras{WindowLimit: tc.window, WindowPeriod: time.Hour}
			// DESIGN §5: the window's hash is :rl:<unix ms / window ms>.
			bucket := time.Now().UnixMilli() / time.Hour.Milliseconds()
			windowEnd := (bucket + 1) * time.Hour.Milliseconds()
			rl := fmt.Sprintf("sk:{a%d:s%d}:rl:", act.ID, k.ID)
			if len(tc.stale) > 0 {
				for u, n := range tc.stale {
					if err := rdb.Do(ctx, rdb.B().Hset().Key(rl+strconv.FormatInt(bucket-1, 10)).FieldValue().FieldValue(strconv.FormatInt(u, 10), n).Build()).Error(); err != nil {
						t.Fatal(err)
					}
				}
			}
			t0 := serverMs(t, rdb)
			if len(tc.before) > 0 {
				got, err := r.stock.OccupyBatch(ctx, pa, k, x, tc.before, nil)
				if err != nil {
					t.Fatal(err)
				}
				for j, g := range got {
					if g.Code != "OK" {
						t.Fatalf("earlier buyer %d: %+v", j, g)
					}
				}
			}
			for u, n := range tc.prior {
				if err := rdb.Do(ctx, rdb.B().Hset().Key(rl+strconv.FormatInt(bucket, 10)).FieldValue().FieldValue(strconv.FormatInt(u, 10), n).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			if tc.mark {
				if err := r.stock.SetSoldOut(ctx, act.ID, k.ID, true); err != nil {
					t.Fatal(err)
				}
			}
			got, err := r.stock.OccupyBatch(ctx, pa, k, x, tc.buyers, nil)
			if err != nil {
				t.Fatal(err)
			}
			t1 := serverMs(t, rdb)
			if len(got) != len(tc.want) {
				t.Fatalf("%d answers for %d buyers", len(got), len(tc.buyers))
			}
			for j, w := range tc.want {
				g := got[j]
				if g.Code != w.code || g.Remaining != w.remaining || g.Holder != w.holder {
					t.Errorf("buyer %d %+v: %+v, want %+v", j, tc.buyers[j], g, w)
				}
				// RATE_LIMITED says when the hour's window ends, by Redis'
				// clock during the call.
				if limited := w.code == "RATE_LIMITED"; limited != (g.RetryAfter > 0) ||
					limited && (g.RetryAfter.Milliseconds() > windowEnd-t0 || g.RetryAfter.Milliseconds() < windowEnd-t1) {
					t.Errorf("buyer %d: retry after %v, want the %d to %d ms left of the window", j, g.RetryAfter, windowEnd-t1, windowEnd-t0)
				}
			}
			// DESIGN §5: sk:{a<activity>:s<sku>}:stock, :sold, :users.
			p := fmt.Sprintf("sk:{a%d:s%d}:", act.ID, k.ID)
			get := func(key string) int64 {
				t.Helper()
				n, err := rdb.Do(ctx, rdb.B().Get().Key(p+key).Build()).AsInt64()
				if err != nil {
					t.Fatalf("GET %s%s: %v", p, key, err)
				}
				return n
			}
			if rem, sold := get("stock"), get("sold"); rem != tc.remaining || sold != tc.sold {
				t.Errorf("remaining %d sold %d, want %d and %d", rem, sold, tc.remaining, tc.sold)
			}
			users, err := rdb.Do(ctx, rdb.B().Hgetall().Key(p+"users").Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for u, rn := range tc.users {
				want[strconv.FormatInt(u, 10)] = rn
			}
			if fmt.Sprint(users) != fmt.Sprint(want) {
				t.Errorf("users %v, want %v", users, want)
			}
			units, err := rdb.Do(ctx, rdb.B().Hgetall().Key(p+"qty").Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(units) != fmt.Sprint(tc.units) {
				t.Errorf("qty %v, want %v", units, tc.units)
			}
			// :pending, the sweeper's journal: an entry per call, naming
			// every ticket taken (one ZADD a call: cost_test.go), by accept time (Redis server ms,
			// so between the TIMEs read around it).
			pend, err := rdb.Do(ctx, rdb.B().Zrange().Key(p+"pending").Min("0").Max("-1").Withscores().Build()).AsZScores()
			if err != nil {
				t.Fatal(err)
			}
			var members []string
			for _, z := range pend {
				members = append(members, strings.Split(z.Member, ",")...)
				if ms := int64(z.Score); ms < t0 || ms > t1 {
					t.Errorf("pending %s at %d, not between %d and %d", z.Member, ms, t0, t1)
				}
			}
			sort.Strings(members)
			if fmt.Sprint(members) != fmt.Sprint(tc.pending) {
				t.Errorf("pending %v, want %v", members, tc.pending)
			}
			// :rl:<bucket>, the window's hash: one per SKU and window,
			// userId -> attempts, expiring when the window ends (and a
			// second of grace); none at all while the window is off. The
			// previous window's hash keeps what it held.
			keys, err := rdb.Do(ctx, rdb.B().Keys().Pattern(rl+"*").Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			wantKeys := 0
			if len(tc.counts) > 0 {
				wantKeys++
			}
			if len(tc.stale) > 0 {
				wantKeys++
			}
			if len(keys) != wantKeys {
				t.Errorf("window hashes %v, want %d", keys, wantKeys)
			}
			for key, want := range map[string]map[int64]string{rl + strconv.FormatInt(bucket, 10): tc.counts, rl + strconv.FormatInt(bucket-1, 10): tc.stale} {
				if len(want) == 0 {
					continue
				}
				got, err := rdb.Do(ctx, rdb.B().Hgetall().Key(key).Build()).AsStrMap()
				if err != nil {
					t.Fatal(err)
				}
				ws := map[string]string{}
				for u, n := range want {
					ws[strconv.FormatInt(u, 10)] = n
				}
				if fmt.Sprint(got) != fmt.Sprint(ws) {
					t.Errorf("%s = %v, want %v", key, got, ws)
				}
			}
			if len(tc.counts) > 0 {
				key := rl + strconv.FormatInt(bucket, 10)
				ms, err := rdb.Do(ctx, rdb.B().Pttl().Key(key).Build()).AsInt64()
				if err != nil || ms <= 0 || ms > windowEnd-t0+1000 {
					t.Errorf("%s expires in %d ms (%v), want by the window's end (%d ms) and a second", key, ms, err, windowEnd-t0)
				}
			}
			// :r, the results hash: the call writes none (an accepted
			// buyer's QUEUING is its record in users, checked above).
			if n, err := rdb.Do(ctx, rdb.B().Exists().Key(p+"r").Build()).AsInt64(); err != nil || n != 0 {
				t.Errorf("the call wrote a results hash (%d %v)", n, err)
			}
		})
	}
	t.Run("an activity never preheated (or lost by Redis) is missing for every buyer", func(t *testing.T) {
		act := activity(99, 999, 5, false)
		got, err := r.stock.OccupyBatch(ctx, &act, &act.SKUs[0], Extras{}, []Buyer{{a, "ra", 1}, {b, "rb", 1}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, g := range got {
			if g != (OccupyResult{Code: "MISSING", Remaining: -1}) {
				t.Errorf("buyer %d: %+v, want MISSING", j, g)
			}
		}
		if n, err := rdb.Do(ctx, rdb.B().Exists().Key("sk:{a99:s999}:stock", "sk:{a99:s999}:users", "sk:{a99:s999}:pending",
			"sk:{a99:s999}:r").Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("a missing SKU's keys were written: %d (%v)", n, err)
		}
	})
}

// serverMs is Redis server time in ms, as the scripts compute it.
func serverMs(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	if err != nil || len(v) != 2 {
		t.Fatalf("TIME: %v %v", v, err)
	}
	sec, _ := strconv.ParseInt(v[0], 10, 64)
	usec, _ := strconv.ParseInt(v[1], 10, 64)
	return sec*1000 + usec/1000
}
