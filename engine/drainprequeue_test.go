package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/sale"
)

// TestPrequeueSurvivesItsDrainerStopping: 80 attempts taken before the
// start of a 60-unit SKU with a pre-queue. Nothing is decided before the
// start; the drainer records a draw and serves in its order; stopped
// mid-way and started again, the next drainer serves the same order from
// the record: exactly the stock sold, once each, to the head of the
// recorded order.
func TestPrequeueSurvivesItsDrainerStopping(t *testing.T) {
	q := newQueueRig(t, 1)
	act := activity(1, 10, 60, false)
	start := time.Now().Add(3 * time.Second)
	act.Start, act.Prequeue = start, 1
	act.SKUs[0].Mode, act.SKUs[0].Rate = sale.ModeQueue, 50
	a, k := q.preheat(t, act)
	ctx := context.Background()
	rns := make([]string, 80)
	offset := map[int64]int{} // offset -> index in rns
	for i := range rns {
		w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: int64(100 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		rns[i] = w.RequestNo
		offset[w.Offset] = i
	}
	if time.Now().After(start) {
		t.Fatal("the attempts took past the start; the test's start is too close")
	}
	stop := q.drain(t, "")
	time.Sleep(time.Until(start) - 300*time.Millisecond)
	for i, e := range q.results(t, rns) {
		if e.State != sale.ResultWaiting {
			t.Fatalf("ticket %d decided before the start: %+v", i, e)
		}
	}
	q.stopMidway(t, rns, stop)
	pk := sale.PrequeueKey(1, 10)
	draw := q.def.Str(t, "HGET", pk, "draw")
	q.drain(t, "")
	es := q.settled(t, rns, 30*time.Second)
	won := q.soldExactly(t, es, 60)
	if again := q.def.Str(t, "HGET", pk, "draw"); again != draw {
		t.Fatalf("the draw changed across drainers: %s, then %s", draw, again)
	}
	d, err := sale.ParseDraw(draw)
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, f := range strings.Split(q.def.Str(t, "HGET", pk, "order"), ",") {
		o, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("order %q: %v", f, err)
		}
		order = append(order, o)
	}
	offs := make([]int64, 0, len(offset))
	for o := range offset {
		offs = append(offs, o)
	}
	want := d.Permute(offs)
	if fmtOffsets(want) != fmtOffsets(order) {
		t.Fatalf("recorded order %v, want the draw's %v", order, want)
	}
	// Windows of 16 in the recorded order: the first three windows (48)
	// all won, and every winner is within the first four.
	rank := map[int]int{}
	for r, o := range order {
		rank[offset[o]] = r
	}
	head := 0
	for _, i := range won {
		if rank[i] >= 64 {
			t.Fatalf("ticket at rank %d of the recorded order won", rank[i])
		}
		if rank[i] < 48 {
			head++
		}
	}
	if head != 48 {
		t.Fatalf("%d of the first 48 in the recorded order won, want all", head)
	}
	if s := q.def.Str(t, "HGET", pk, "done"); s != "80" {
		t.Fatalf("done %q, want 80", s)
	}
}

func fmtOffsets(o []int64) string {
	return string(sale.AppendOrder(nil, o))
}

// TestPrequeueHeldWithinItsBound: engine.queue.prequeue_max 20 and 50
// attempts pre-queued on one partition: the draw's cutoff is 20 past the
// first, the first 20 are served in the drawn order and the 30 past the
// cutoff in line order after them — each decided once, the stock sold
// exactly.
func TestPrequeueHeldWithinItsBound(t *testing.T) {
	q := newQueueRig(t, 1)
	q.cfg.Queue.PrequeueMax = 20
	act := activity(1, 10, 40, false)
	start := time.Now().Add(2 * time.Second)
	act.Start, act.Prequeue = start, 1
	act.SKUs[0].Mode = sale.ModeQueue
	a, k := q.preheat(t, act)
	ctx := context.Background()
	rns := make([]string, 50)
	offs := make([]int64, len(rns))
	for i := range rns {
		w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: int64(100 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		rns[i], offs[i] = w.RequestNo, w.Offset
	}
	if time.Now().After(start) {
		t.Fatal("the attempts took past the start; the test's start is too close")
	}
	q.drain(t, "")
	es := q.settled(t, rns, 30*time.Second)
	won := q.soldExactly(t, es, 40)
	pk := sale.PrequeueKey(1, 10)
	d, err := sale.ParseDraw(q.def.Str(t, "HGET", pk, "draw"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Cutoff != offs[0]+20 {
		t.Fatalf("cutoff %d, want %d (20 past the first attempt at %d)", d.Cutoff, offs[0]+20, offs[0])
	}
	if got, want := q.def.Str(t, "HGET", pk, "order"), fmtOffsets(d.Permute(offs[:20])); got != want {
		t.Fatalf("recorded order %s, want the draw of the first 20: %s", got, want)
	}
	// 40 units: the 20 drawn and the next 20 in line order win, the last
	// 10 in line order lose.
	for _, i := range won {
		if i >= 40 {
			t.Fatalf("attempt %d of 50 won: the ones past the cutoff are served in line order", i)
		}
	}
}
