package stock

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/sale"
)

// TestPendingJournalCoversTheUnclaimedRecords: through a random run of
// occupies (alone and several buyers to a call), claims (one by one and in
// batches), releases (plain, forced, foreign, repeated) and closes, every
// user record that is not claimed is named by an entry of the pending
// journal, read by DESIGN §5's key names, after every step; and a read of
// the whole journal by the sweeper's page (Pending) returns exactly those
// records and leaves no spent entry (one naming no unclaimed record).
func TestPendingJournalCoversTheUnclaimedRecords(t *testing.T) {
	eachOccupy(t, testPendingJournalCoversTheUnclaimedRecords)
}

func testPendingJournalCoversTheUnclaimedRecords(t *testing.T, r *rig) {
	ctx := context.Background()
	act := activity(1, 11, 60, false)
	act.SKUs[0].LimitPerUser = 2
	a, k := r.preheat(t, act)
	rdb := r.def.Client(t)
	p := "sk:{a1:s11}:"
	unclaimed := func() map[string]bool {
		users, err := rdb.Do(ctx, rdb.B().Hgetall().Key(p+"users").Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for u, rn := range users {
			claimed, err := rdb.Do(ctx, rdb.B().Sismember().Key(p+"claimed").Member(rn).Build()).AsBool()
			if err != nil {
				t.Fatal(err)
			}
			if !claimed {
				out[u+":"+rn] = true
			}
		}
		return out
	}
	entries := func() []string {
		out, err := rdb.Do(ctx, rdb.B().Zrange().Key(p+"pending").Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	named := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range entries() {
			for part := range strings.SplitSeq(e, ",") {
				out[part] = true
			}
		}
		return out
	}
	sorted := func(m map[string]bool) []string {
		return slices.Sorted(maps.Keys(m))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var tickets []*sale.Message // every ticket an occupy answered OK
	seq := 0
	pick := func() *sale.Message { return tickets[rng.IntN(len(tickets))] }
	ops := map[string]int{}
	for step := range 300 {
		op := "occupy"
		if len(tickets) > 0 {
			op = []string{"occupy", "occupy batch", "claim", "claim batch", "release", "force release", "close", "foreign release", "sweep read"}[rng.IntN(9)]
		}
		switch op {
		case "occupy batch":
			var bs []Buyer
			for range 3 {
				seq++
				bs = append(bs, Buyer{UserID: int64(rng.IntN(30) + 1), RequestNo: "t" + strconv.Itoa(seq), Quantity: int64(rng.IntN(2) + 1)})
			}
			out, err := r.stock.OccupyBatch(ctx, a, k, Extras{}, bs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, res := range out {
				if res.Code == CodeOK {
					tickets = append(tickets, &sale.Message{RequestNo: bs[i].RequestNo, ActivityID: 1, SKUID: 11, UserID: bs[i].UserID, Quantity: bs[i].Quantity})
				}
			}
		case "sweep read":
			var got []string
			for off := 0; ; {
				page, err := r.stock.Pending(ctx, 1, k, time.Now().Add(time.Hour), off, 4)
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range page.Tickets {
					got = append(got, PendingMember(x.UserID, x.RequestNo))
				}
				if !page.More {
					break
				}
				off += page.Kept
			}
			slices.Sort(got)
			if w := sorted(unclaimed()); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("step %d: the sweeper's read %v, want the unclaimed records %v", step, got, w)
			}
			left := unclaimed()
			for _, e := range entries() {
				live := false
				for part := range strings.SplitSeq(e, ",") {
					live = live || left[part]
				}
				if !live {
					t.Fatalf("step %d: spent entry %q left after a whole read", step, e)
				}
			}
		case "occupy":
			seq++
			u, q := int64(rng.IntN(30)+1), int64(rng.IntN(2)+1)
			rn := "t" + strconv.Itoa(seq)
			res, err := r.occupy(ctx, a, k, u, rn, q)
			if err != nil {
				t.Fatal(err)
			}
			if res.Code == CodeOK {
				tickets = append(tickets, &sale.Message{RequestNo: rn, ActivityID: 1, SKUID: 11, UserID: u, Quantity: q})
			}
			op += " " + res.Code
		case "claim":
			if _, err := r.stock.Claim(ctx, pick()); err != nil {
				t.Fatal(err)
			}
		case "claim batch":
			if _, err := r.stock.ClaimBatch(ctx, []*sale.Message{pick(), pick(), pick()}); err != nil {
				t.Fatal(err)
			}
		case "release", "force release":
			if _, err := r.stock.Release(ctx, pick(), op == "force release"); err != nil {
				t.Fatal(err)
			}
		case "close":
			if _, err := r.stock.ReleaseClosed(ctx, pick()); err != nil {
				t.Fatal(err)
			}
		case "foreign release":
			m := *pick()
			m.RequestNo = "not-" + m.RequestNo
			if _, err := r.stock.Release(ctx, &m, true); err != nil {
				t.Fatal(err)
			}
		}
		ops[op]++
		have := named()
		for m := range unclaimed() {
			if !have[m] {
				t.Fatalf("step %d (%s): unclaimed record %s in no entry of %v", step, op, m, entries())
			}
		}
	}
	for _, op := range []string{"occupy OK", "occupy DUPLICATE", "occupy batch", "claim", "claim batch", "release", "force release", "close", "foreign release", "sweep read"} {
		if ops[op] == 0 {
			t.Errorf("the run never did %q (%v): pick another seed", op, ops)
		}
	}
	if c := r.counts(t, 1, 11); c.Pending != c.Holders-c.Claimed || c.Pending == 0 || c.Claimed == 0 {
		t.Fatalf("counts %+v: pending must be holders − claimed, neither empty", c)
	}
	if multi := slices.ContainsFunc(entries(), func(e string) bool { return strings.Contains(e, ",") }); !multi {
		t.Errorf("no entry names several tickets: pick another seed")
	}
}

// TestPendingReadsOnlyTheOldTickets: Pending pages through the tickets
// accepted before a time, oldest first, with their recorded units, and
// never past that time.
func TestPendingReadsOnlyTheOldTickets(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	act := activity(1, 11, 100, true)
	act.SKUs[0].LimitPerUser = 3
	a, k := r.preheat(t, act)
	for u := int64(1); u <= 5; u++ {
		if res, err := r.stock.Occupy(ctx, a, k, u, fmt.Sprint("old-", u), u%3+1); err != nil || res.Code != CodeOK {
			t.Fatal(res, err)
		}
		time.Sleep(2 * time.Millisecond) // distinct accept times, so the order is the occupy order
	}
	time.Sleep(5 * time.Millisecond)
	cut := time.Now()
	time.Sleep(5 * time.Millisecond)
	if res, err := r.stock.Occupy(ctx, a, k, 9, "young", 1); err != nil || res.Code != CodeOK {
		t.Fatal(res, err)
	}
	var seen []string
	for off := 0; ; {
		page, err := r.stock.Pending(ctx, 1, k, cut, off, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Tickets {
			if want := p.UserID%3 + 1; p.Units != want || p.RequestNo != fmt.Sprint("old-", p.UserID) || p.At.After(cut) {
				t.Errorf("ticket %+v: want %d units, accepted before %v", p, want, cut)
			}
			seen = append(seen, p.RequestNo)
		}
		if !page.More {
			break
		}
		off += page.Kept
	}
	if fmt.Sprint(seen) != "[old-1 old-2 old-3 old-4 old-5]" {
		t.Fatalf("pages %v, want the five old tickets oldest first", seen)
	}
	if page, err := r.stock.Pending(ctx, 1, k, time.Now().Add(time.Second), 5, 10); err != nil || len(page.Tickets) != 1 || page.Tickets[0].RequestNo != "young" {
		t.Fatalf("past the old ones: %+v %v, want only the young ticket", page, err)
	}
}

// TestPendingPageDropsOnlySpentEntries: a page read removes an entry none of
// whose tickets is held unclaimed (claimed, released, a record that names
// another ticket, a part no script writes) and keeps whole an entry with
// one such ticket, returning that ticket only; a page ends after the entry
// that reaches its ticket bound, and says more may follow.
func TestPendingPageDropsOnlySpentEntries(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 100, false))
	batch := func(rns ...string) {
		var bs []Buyer
		for _, rn := range rns {
			u, _ := strconv.ParseInt(rn[2:], 10, 64)
			bs = append(bs, Buyer{UserID: u, RequestNo: rn, Quantity: 1})
		}
		out, err := r.stock.OccupyBatch(ctx, a, k, Extras{}, bs, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, res := range out {
			if res.Code != CodeOK {
				t.Fatalf("%s: %+v", rns[i], res)
			}
		}
		time.Sleep(2 * time.Millisecond) // entries in call order
	}
	msg := func(rn string) *sale.Message {
		u, _ := strconv.ParseInt(rn[2:], 10, 64)
		return &sale.Message{RequestNo: rn, ActivityID: 1, SKUID: 11, UserID: u, Quantity: 1}
	}
	batch("rn1", "rn2", "rn3") // 1 and 3 claimed, 2 released: spent
	batch("rn4", "rn5")        // 4 claimed, 5 left: kept whole
	batch("rn6")               // claimed: spent
	batch("rn7", "rn8", "rn9") // untouched
	if _, err := r.stock.ClaimBatch(ctx, []*sale.Message{msg("rn1"), msg("rn3"), msg("rn4"), msg("rn6")}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.stock.Release(ctx, msg("rn2"), false); err != nil {
		t.Fatal(err)
	}
	keys := sale.KeysFor(1, 11)
	r.def.Do(t, "ZADD", keys.Pending, "5", "not a ticket,12:rn12") // a hand edit: 12 holds nothing
	entries := func() []string {
		out, err := r.def.Client(t).Do(ctx, r.def.Client(t).B().Zrange().Key(keys.Pending).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	cut := time.Now().Add(time.Minute)
	// Bound the page's tickets to 4: it ends after the entry that reaches
	// them (the hand edit's one ticket, then rn1..rn3).
	v, err := pendingPageScript.Exec(ctx, r.def.Client(t), []string{keys.Users, keys.Claim, keys.Pending},
		[]string{strconv.FormatInt(cut.UnixMilli(), 10), "0", "10", "4"}).AsIntSlice()
	if err != nil || fmt.Sprint(v) != "[2 0 1]" {
		t.Fatalf("bounded page: %v %v, want 2 read, none kept, more", v, err)
	}
	if got := fmt.Sprint(entries()); got != "[4:rn4,5:rn5 6:rn6 7:rn7,8:rn8,9:rn9]" {
		t.Fatalf("journal after the bounded page: %s", got)
	}
	page, err := r.stock.Pending(ctx, 1, k, cut, 0, 10)
	var got []string
	for _, x := range page.Tickets {
		got = append(got, x.RequestNo)
	}
	if err != nil || fmt.Sprint(got) != "[rn5 rn7 rn8 rn9]" || page.Kept != 2 || page.More {
		t.Fatalf("page: %v kept %d more %v (%v), want rn5 and 7..9, two entries kept, no more", got, page.Kept, page.More, err)
	}
	if got := fmt.Sprint(entries()); got != "[4:rn4,5:rn5 7:rn7,8:rn8,9:rn9]" {
		t.Fatalf("journal after the page: %s", got)
	}
}

// TestReindexAddsTheUnclaimedRecordsNoEntryNames: tickets taken before the
// journal existed are added under the time given, judged by their record
// at the call (a claimed one, one whose record is gone, are not); a
// present entry keeps its time.
func TestReindexAddsTheUnclaimedRecordsNoEntryNames(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	a, k := r.preheat(t, activity(1, 11, 100, false))
	for u := int64(1); u <= 3; u++ {
		if res, err := r.stock.Occupy(ctx, a, k, u, fmt.Sprint("rn", u), 1); err != nil || res.Code != CodeOK {
			t.Fatal(res, err)
		}
	}
	keys := sale.KeysFor(1, 11)
	// An older binary's tickets: records without entries (4 unclaimed, 5
	// claimed).
	r.def.Do(t, "HSET", keys.Users, "4", "rn4", "5", "rn5")
	r.def.Do(t, "SADD", keys.Claim, "rn5")
	before, err := r.stock.Records(ctx, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	old := time.UnixMilli(1_700_000_000_000)
	added, err := r.stock.Reindex(ctx, 1, k, []PendingTicket{
		{UserID: 4, RequestNo: "rn4", At: old}, {UserID: 5, RequestNo: "rn5", At: old},
		{UserID: 8, RequestNo: "gone", At: old},
		{UserID: 1, RequestNo: "rn1", At: old}, // present: keeps its accept time
	})
	if err != nil || added != 1 {
		t.Fatalf("reindex: added %d (%v), want 1", added, err)
	}
	after, err := r.stock.Records(ctx, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	members := slices.Sorted(maps.Keys(after.Pending))
	if fmt.Sprint(members) != "[1:rn1 2:rn2 3:rn3 4:rn4]" {
		t.Fatalf("pending %v, want the unclaimed records 1 to 4", members)
	}
	if !after.Pending["4:rn4"].At.Equal(old) || !after.Pending["1:rn1"].At.Equal(before.Pending["1:rn1"].At) {
		t.Fatalf("times: 4 at %v (want %v), 1 at %v (want %v)", after.Pending["4:rn4"].At, old,
			after.Pending["1:rn1"].At, before.Pending["1:rn1"].At)
	}
}
