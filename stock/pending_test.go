package stock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"seckill/sale"
)

// TestPendingIndexIsTheUnclaimedRecords: through a random run of occupies,
// claims (one by one and in batches), releases (plain, forced, foreign,
// repeated) and closes, the pending index always holds exactly the user
// records that are not claimed — read by DESIGN §5's key names, and
// compared with a set worked out from the users hash and the claimed set
// after every step.
func TestPendingIndexIsTheUnclaimedRecords(t *testing.T) {
	eachOccupy(t, testPendingIndexIsTheUnclaimedRecords)
}

func testPendingIndexIsTheUnclaimedRecords(t *testing.T, r *rig) {
	ctx := context.Background()
	act := activity(1, 11, 40, false)
	act.SKUs[0].LimitPerUser = 2
	a, k := r.preheat(t, act)
	rdb := r.def.Client(t)
	p := "sk:{a1:s11}:"
	want := func() []string {
		users, err := rdb.Do(ctx, rdb.B().Hgetall().Key(p+"users").Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for u, rn := range users {
			claimed, err := rdb.Do(ctx, rdb.B().Sismember().Key(p+"claimed").Member(rn).Build()).AsBool()
			if err != nil {
				t.Fatal(err)
			}
			if !claimed {
				out = append(out, u+":"+rn)
			}
		}
		slices.Sort(out)
		return out
	}
	got := func() []string {
		out, err := rdb.Do(ctx, rdb.B().Zrange().Key(p+"pending").Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(out)
		return out
	}

	rng := rand.New(rand.NewPCG(3, 4))
	var tickets []*sale.Message // every ticket an occupy answered OK
	seq := 0
	pick := func() *sale.Message { return tickets[rng.IntN(len(tickets))] }
	ops := map[string]int{}
	for step := range 300 {
		op := "occupy"
		if len(tickets) > 0 {
			op = []string{"occupy", "occupy", "claim", "claim batch", "release", "force release", "close", "foreign release"}[rng.IntN(8)]
		}
		switch op {
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
		if w, g := want(), got(); fmt.Sprint(w) != fmt.Sprint(g) {
			t.Fatalf("step %d (%s): pending %v, want the unclaimed records %v", step, op, g, w)
		}
	}
	for _, op := range []string{"occupy OK", "occupy DUPLICATE", "claim", "claim batch", "release", "force release", "close", "foreign release"} {
		if ops[op] == 0 {
			t.Errorf("the run never did %q (%v): pick another seed", op, ops)
		}
	}
	if c := r.counts(t, 1, 11); c.Pending != c.Holders-c.Claimed || c.Pending == 0 || c.Claimed == 0 {
		t.Fatalf("counts %+v: pending must be holders − claimed, neither empty", c)
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
		page, read, err := r.stock.Pending(ctx, 1, k, cut, off, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page {
			if want := p.UserID%3 + 1; p.Units != want || p.RequestNo != fmt.Sprint("old-", p.UserID) || p.At.After(cut) {
				t.Errorf("ticket %+v: want %d units, accepted before %v", p, want, cut)
			}
			seen = append(seen, p.RequestNo)
		}
		if read < 2 {
			break
		}
		off += read
	}
	if fmt.Sprint(seen) != "[old-1 old-2 old-3 old-4 old-5]" {
		t.Fatalf("pages %v, want the five old tickets oldest first", seen)
	}
	if page, _, err := r.stock.Pending(ctx, 1, k, time.Now().Add(time.Second), 5, 10); err != nil || len(page) != 1 || page[0].RequestNo != "young" {
		t.Fatalf("past the old ones: %+v %v, want only the young ticket", page, err)
	}
}

// TestReindexPutsTheIndexInStepWithTheRecords: tickets taken before the
// index existed are added under the time given; entries of no unclaimed
// record are removed; a present entry keeps its time.
func TestReindexPutsTheIndexInStepWithTheRecords(t *testing.T) {
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
	// claimed); an older consumer's claim left 3's entry behind.
	r.def.Do(t, "HSET", keys.Users, "4", "rn4", "5", "rn5")
	r.def.Do(t, "SADD", keys.Claim, "rn5", "rn3")
	r.def.Do(t, "ZADD", keys.Pending, "7", "8:gone") // and a record long gone
	before, err := r.stock.Records(ctx, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	old := time.UnixMilli(1_700_000_000_000)
	added, removed, err := r.stock.Reindex(ctx, 1, k, []PendingTicket{
		{UserID: 4, RequestNo: "rn4", At: old}, {UserID: 5, RequestNo: "rn5", At: old},
		{UserID: 3, RequestNo: "rn3"}, {UserID: 8, RequestNo: "gone"},
		{UserID: 1, RequestNo: "rn1", At: old}, // present: keeps its accept time
	})
	if err != nil || added != 1 || removed != 2 {
		t.Fatalf("reindex: added %d removed %d (%v), want 1 and 2", added, removed, err)
	}
	after, err := r.stock.Records(ctx, 1, k)
	if err != nil {
		t.Fatal(err)
	}
	var members []string
	for m := range after.Pending {
		members = append(members, m)
	}
	slices.Sort(members)
	if fmt.Sprint(members) != "[1:rn1 2:rn2 4:rn4]" {
		t.Fatalf("pending %v, want the unclaimed records 1, 2 and 4", members)
	}
	if !after.Pending["4:rn4"].At.Equal(old) || !after.Pending["1:rn1"].At.Equal(before.Pending["1:rn1"].At) {
		t.Fatalf("times: 4 at %v (want %v), 1 at %v (want %v)", after.Pending["4:rn4"].At, old,
			after.Pending["1:rn1"].At, before.Pending["1:rn1"].At)
	}
}
