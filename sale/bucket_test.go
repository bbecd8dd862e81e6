package sale

import "testing"

// TestBucketTicketNumbers: a bucketed ticket number names its bucket and
// reads back; the unbucketed form is today's; malformed buckets are not
// ticket numbers.
func TestBucketTicketNumbers(t *testing.T) {
	g := NewRequestNos(3)
	rn := g.NextIn(12, 1001, 3)
	a, s, b, id, ok := ParseTicket(rn)
	if !ok || a != 12 || s != 1001 || b != 3 || id == "" {
		t.Fatalf("ParseTicket(%q) = %d %d %d %q %v", rn, a, s, b, id, ok)
	}
	if a2, s2, _, ok := ParseRequestNo(rn); !ok || a2 != 12 || s2 != 1001 {
		t.Fatalf("ParseRequestNo(%q) = %d %d %v", rn, a2, s2, ok)
	}
	if rn0 := g.NextIn(12, 1001, 0); TicketBucket(rn0) != 0 {
		t.Fatalf("bucket 0 of %q: %d", rn0, TicketBucket(rn0))
	}
	if plain := g.Next(12, 1001); TicketBucket(plain) != NoBucket {
		t.Fatalf("%q names bucket %d", plain, TicketBucket(plain))
	}
	for _, bad := range []string{"12-1001.-5", "12-1001.01-5", "12-1001.64-5", "12-1001.x-5", "12-.3-5", "12-1001.3.1-5"} {
		if _, _, _, _, ok := ParseTicket(bad); ok {
			t.Errorf("%q read as a ticket number", bad)
		}
	}
	if KeysIn(12, 1001, 3).Stock != "sk:{a12:s1001:b3}:stock" || KeysIn(12, 1001, NoBucket) != KeysFor(12, 1001) {
		t.Fatalf("bucket keys: %+v", KeysIn(12, 1001, 3))
	}
}

// TestBucketOfSpreadsUsers: consecutive user ids spread over 4 buckets
// within 5% of even, and the shares of n units add up to n.
func TestBucketOfSpreadsUsers(t *testing.T) {
	k := SKU{ID: 1, Buckets: 4}
	var per [4]int
	for u := int64(1); u <= 40000; u++ {
		per[k.BucketOf(u)]++
	}
	for b, n := range per {
		if n < 9500 || n > 10500 {
			t.Fatalf("bucket %d has %d of 40000 users: %v", b, n, per)
		}
	}
	var sum int64
	for b := range 4 {
		sum += k.BucketShare(200_001, b)
	}
	if sum != 200_001 || k.BucketShare(200_001, 0) != 50_001 || k.BucketShare(200_001, 3) != 50_000 {
		t.Fatalf("shares of 200001 sum to %d", sum)
	}
	if (&SKU{}).BucketOf(7) != NoBucket {
		t.Fatal("a SKU not split has a bucket")
	}
}

// TestBucketsValidate: buckets outside 0..64, and hotShards on a SKU that
// is not hot, not split or names hotShard, are refused.
func TestBucketsValidate(t *testing.T) {
	zero := 0
	for _, k := range []SKU{
		{ID: 1, Buckets: -1}, {ID: 1, Buckets: 65},
		{ID: 1, Buckets: 4, HotShards: []int{0, 1}},
		{ID: 1, Hot: true, HotShards: []int{0}},
		{ID: 1, Hot: true, Buckets: 2, HotShards: []int{-1}},
		{ID: 1, Hot: true, Buckets: 2, HotShards: []int{0}, HotShard: &zero},
	} {
		if err := k.validateBuckets(); err == nil {
			t.Errorf("%+v accepted", k)
		}
	}
	if err := (&SKU{ID: 1, Hot: true, Buckets: 4, HotShards: []int{0, 1}}).validateBuckets(); err != nil {
		t.Fatal(err)
	}
}
