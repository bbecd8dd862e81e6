package sale

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"
)

func seedOf(n uint64) (s [32]byte) {
	binary.LittleEndian.PutUint64(s[:], n)
	return s
}

func TestPermuteIsDeterministicAndAPermutation(t *testing.T) {
	d := Draw{Seed: seedOf(7), Partition: 3, Cutoff: 100}
	offs := []int64{9, 4, 50, 12, 33, 2, 71, 8}
	a := d.Permute(offs)
	b := d.Permute([]int64{71, 2, 33, 12, 50, 4, 9, 8}) // another arrival order, the same set
	if !slices.Equal(a, b) {
		t.Fatalf("the same seed and offsets gave %v and %v", a, b)
	}
	sorted := slices.Clone(a)
	slices.Sort(sorted)
	want := slices.Clone(offs)
	slices.Sort(want)
	if !slices.Equal(sorted, want) {
		t.Fatalf("%v is not a permutation of %v", a, offs)
	}
	if offs[0] != 9 {
		t.Fatal("Permute changed its input")
	}
	if c := (Draw{Seed: seedOf(8)}).Permute(offs); slices.Equal(c, a) {
		t.Fatalf("another seed gave the same order %v", c)
	}
}

func TestDrawRoundTrips(t *testing.T) {
	d := Draw{Seed: seedOf(1 << 40), Partition: 5, Cutoff: 12345}
	got, err := ParseDraw(d.String())
	if err != nil || got != d {
		t.Fatalf("ParseDraw(%q) = %+v, %v", d.String(), got, err)
	}
	for _, bad := range []string{"", "x|1|2", d.String()[2:], d.String() + "|1", "00|1|2",
		d.String()[:64] + "|-1|2", d.String()[:64] + "|1|-2", d.String()[:64] + "|a|2"} {
		if _, err := ParseDraw(bad); err == nil {
			t.Errorf("ParseDraw(%q) accepted", bad)
		}
	}
}

func TestPrequeueValidatedAndLineOpens(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	a := Activity{ID: 1, Start: start, End: start.Add(time.Hour), Prequeue: 10, SKUs: []SKU{{ID: 1, Stock: 1}}}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if !a.LineOpens().Equal(start.Add(-10 * time.Minute)) {
		t.Fatalf("line opens %v", a.LineOpens())
	}
	if !a.Prequeued(start.UnixMilli()-1) || a.Prequeued(start.UnixMilli()) {
		t.Fatal("prequeued is the time before the start")
	}
	for _, p := range []int64{-1, MaxPrequeueMinutes + 1} {
		a.Prequeue = p
		if err := a.Validate(); err == nil {
			t.Errorf("prequeue %d accepted", p)
		}
	}
	a.Prequeue = 0
	if a.Prequeued(0) {
		t.Fatal("no pre-queue, nothing pre-queued")
	}
}
