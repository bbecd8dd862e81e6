package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"

	"seckill/catalog"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock"
	"seckill/stock/results"
)

// queueRig is an engine with queue mode on over real Redis and kfake: the
// edge's Line and a drainer.
type queueRig struct {
	*rig
	k    *testenv.Kafka
	e    *Local
	line *Line
	cfg  Config
}

func newQueueRig(t *testing.T, partitions int32, opts ...Option) *queueRig {
	t.Helper()
	r := newRig(t)
	k := testenv.StartKafka(t, partitions)
	cfg := DefaultConfig()
	cfg.Kafka.Brokers = k.Addrs
	cfg.Kafka.SendTimeout = 2 * time.Second
	cfg.Signing = testSigning
	cfg.Queue.Enabled = true
	cfg.Queue.Window = 16
	cfg.Queue.SessionTimeout = 6 * time.Second
	e, err := New(cfg, r.stock, r.res, zaptest.NewLogger(t), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	line, err := NewLine(cfg, r.stock, r.res, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { line.Close() })
	return &queueRig{rig: r, k: k, e: e, line: line, cfg: cfg}
}

// queuedSKU preheats SKU 10 of activity 1 with stock units, in queue mode.
func (q *queueRig) queuedSKU(t *testing.T, stock int64) (*sale.Activity, *sale.SKU) {
	t.Helper()
	act := activity(1, 10, stock, false)
	act.SKUs[0].Mode = sale.ModeQueue
	return q.preheat(t, act)
}

// drain runs a drainer (group) until the test ends or stop is called.
func (q *queueRig) drain(t *testing.T, group string) (stop func()) {
	t.Helper()
	cfg := q.cfg.Queue
	if group != "" {
		cfg.Group = group
	}
	d, err := NewDrainer(q.e, cfg, zaptest.NewLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(context.Background()) }()
	var once sync.Once
	stop = func() { once.Do(func() { d.Close(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// results reads every ticket's result as its buyer reads it (the owner is
// the user whose record names it: a QUEUING ticket has no result field),
// failing the test on a read error.
func (q *queueRig) results(t *testing.T, rns []string) []results.Entry {
	t.Helper()
	ctx := context.Background()
	users := make([]int64, len(rns))
	holders := map[string]map[string]int64{} // users key -> requestNo -> userId
	for i, rn := range rns {
		a, k, b, _, ok := sale.ParseTicket(rn)
		if !ok {
			continue
		}
		key := sale.UsersKeyIn(a, k, b)
		byRN, ok := holders[key]
		if !ok {
			c := q.stock.BucketClient(a, k, b)
			m, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
			if err != nil {
				t.Fatal(err)
			}
			byRN = map[string]int64{}
			for u, held := range m {
				byRN[held], _ = strconv.ParseInt(u, 10, 64)
			}
			holders[key] = byRN
		}
		users[i] = byRN[rn]
	}
	es, err := q.res.ReadMany(ctx, rns, users)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// settled waits until no ticket of rns is WAITING (or unwritten).
func (q *queueRig) settled(t *testing.T, rns []string, within time.Duration) []results.Entry {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		es := q.results(t, rns)
		waiting := 0
		for _, e := range es {
			if e.State == "" || e.State == sale.ResultWaiting {
				waiting++
			}
		}
		if waiting == 0 {
			return es
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d tickets still waiting after %v", waiting, len(rns), within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// soldExactly checks that the line sold exactly stock units of SKU 10 of
// activity 1, each once: that many QUEUING tickets (the rest FAIL
// SOLD_OUT), holders and order messages. It returns the index of each
// winner in es.
func (q *queueRig) soldExactly(t *testing.T, es []results.Entry, stock int64) []int {
	t.Helper()
	var won []int
	for i, e := range es {
		switch {
		case e.State == sale.ResultQueuing:
			won = append(won, i)
		case e.State == sale.ResultFail && e.Code == "SOLD_OUT":
		default:
			t.Fatalf("ticket %d ended %+v", i, e)
		}
	}
	c := q.counts(t, 1, 10)
	if int64(len(won)) != stock || c.Remaining != 0 || c.Holders != stock {
		t.Fatalf("%d won, counts %+v: want exactly the %d units", len(won), c, stock)
	}
	if n := ordersProduced(t, q.k.Addrs); n != stock {
		t.Fatalf("%d order messages, want %d", n, stock)
	}
	return won
}

// ordersProduced counts the messages of the orders topic.
func ordersProduced(t *testing.T, addrs []string) int64 {
	t.Helper()
	c, err := sarama.NewClient(addrs, sarama.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	parts, err := c.Partitions(testenv.OrdersTopic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range parts {
		hi, err := c.GetOffset(testenv.OrdersTopic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatal(err)
		}
		n += hi
	}
	return n
}

// TestLineIsDrainedInOrderExactlyOnce: 200 buyers join a 50-unit SKU's
// line; the drainer gives exactly the stock, to buyers among the first
// stock + window of the line (FIFO up to one window), one order message
// each, and every other ticket ends FAIL SOLD_OUT. A buyer who waits is
// refused a second place naming the first ticket; forged and garbage
// attempts in the line are skipped without stopping it; a second drain
// of the whole line (every attempt redelivered) changes nothing.
func TestLineIsDrainedInOrderExactlyOnce(t *testing.T) {
	log := &steps{}
	q := newQueueRig(t, 2, WithRequestLog(log))
	a, k := q.queuedSKU(t, 50)
	ctx := context.Background()

	// Poison first: garbage, and an attempt signed with the order keys
	// (an order message is no attempt).
	kc := q.cfg.Kafka
	kc.Topic = q.cfg.Queue.Topic
	raw, err := NewProducer(kc, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	orderSigner, err := sale.NewSigner(testSigning)
	if err != nil {
		t.Fatal(err)
	}
	forged := sale.Message{RequestNo: "1-10-123", ActivityID: 1, SKUID: 10, UserID: 999, Quantity: 1, UnitPrice: 1, AcceptedAt: 1, TraceID: "x"}
	for _, v := range [][]byte{[]byte("not an attempt"), orderSigner.AppendSigned(nil, &forged)} {
		if err := raw.Send(ctx, []byte("10"), v); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	const buyers = 200
	rns := make([]string, buyers)
	for i := range buyers {
		w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: int64(1000 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatalf("buyer %d: %v", i, err)
		}
		if i > 0 && w.Offset <= 0 {
			t.Fatalf("buyer %d: offset %d", i, w.Offset)
		}
		rns[i] = w.RequestNo
	}
	// Before any drainer runs, every ticket is WAITING where it lies, and
	// a buyer who waits gets no second place.
	for i, e := range q.results(t, rns) {
		if e.State != sale.ResultWaiting || e.Owner != int64(1000+i) {
			t.Fatalf("ticket %d before the drain: %+v", i, e)
		}
	}
	w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: 1000, Quantity: 1}, time.Now().UnixMilli())
	if !errors.Is(err, ErrWaiting) || w.RequestNo != rns[0] {
		t.Fatalf("a waiting buyer again: %+v %v, want ErrWaiting naming %s", w, err, rns[0])
	}

	stop := q.drain(t, "")
	es := q.settled(t, rns, 30*time.Second)
	stop()
	// The last units go to the first in line: the window's occupies
	// reach the ledger in the line's order.
	for _, i := range q.soldExactly(t, es, 50) {
		if i >= 50 {
			t.Errorf("buyer %d of the line won: not FIFO", i)
		}
	}
	// A drained buyer waits no more.
	wk := sale.WaitingKey(1, 10)
	rdb := q.def.Client(t)
	if n, err := rdb.Do(ctx, rdb.B().Hlen().Key(wk).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("waiting records left: %d (%v)", n, err)
	}

	// Every attempt again, to a drainer of a fresh group.
	c := q.counts(t, 1, 10)
	stop = q.drain(t, "second-drainer")
	time.Sleep(3 * time.Second)
	stop()
	again := q.results(t, rns)
	for i := range es {
		if again[i] != es[i] {
			t.Fatalf("ticket %d changed on redelivery: %+v, was %+v", i, again[i], es[i])
		}
	}
	if c2 := q.counts(t, 1, 10); c2 != c {
		t.Fatalf("counts changed on redelivery: %+v, was %+v", c2, c)
	}
	if n := ordersProduced(t, q.k.Addrs); n != 50 {
		t.Fatalf("%d order messages after redelivery, want 50", n)
	}
	// Each refused ticket is one refusal of its buyer, naming it, once,
	// redelivery or not; no ticket's own story gets a step from the line
	// (a winner's goes on with its order message).
	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.got) != 0 {
		t.Errorf("ticket steps %v, want none", log.got)
	}
	refused := map[string]int{}
	for _, g := range log.refused {
		rn, ok := strings.CutPrefix(g, "SOLD_OUT refused in line: ticket ")
		if !ok {
			t.Errorf("refusal %q, want SOLD_OUT naming the ticket", g)
		}
		refused[rn]++
	}
	for i, e := range es {
		want := 0
		if e.State == sale.ResultFail {
			want = 1
		}
		if refused[rns[i]] != want {
			t.Errorf("ticket %d (%s): %d refusals, want %d", i, e.State, refused[rns[i]], want)
		}
	}
}

// TestLineReadsTheRecordOfATicketWithoutResult: a redelivered attempt
// whose result field is gone (it expired, or was never written past
// WAITING) but which holds stock from its first delivery is refused
// neither from the drainer's sold-out mark nor by the ended sale: the
// buyer's record names its ticket, which reads QUEUING, so it is decided
// as redelivered and stays a winner, with no refusal and no second order
// message.
func TestLineReadsTheRecordOfATicketWithoutResult(t *testing.T) {
	log := &steps{}
	q := newQueueRig(t, 1, WithRequestLog(log))
	a, k := q.queuedSKU(t, 5)
	ctx := context.Background()
	rns := make([]string, 10)
	for i := range rns {
		w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: int64(1000 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		rns[i] = w.RequestNo
	}
	stop := q.drain(t, "")
	es := q.settled(t, rns, 30*time.Second)
	stop()
	won := q.soldExactly(t, es, 5)
	rdb := q.def.Client(t)

	// again loses the winners' results and drains the whole line once more
	// with a drainer of a fresh group (one that has seen the SKU sell out,
	// when soldOut): each winner must be decided as its own earlier
	// delivery — no FAIL, no refusal.
	again := func(group string, soldOut bool) {
		t.Helper()
		for _, i := range won {
			if err := rdb.Do(ctx, rdb.B().Hdel().Key(sale.ResultsKey(1, 10)).Field(rns[i]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		log.mu.Lock()
		log.refused = nil
		log.mu.Unlock()
		cfg := q.cfg.Queue
		cfg.Group = group
		reg := prometheus.NewRegistry()
		d, err := NewDrainer(q.e, cfg, zaptest.NewLogger(t), reg)
		if err != nil {
			t.Fatal(err)
		}
		if soldOut {
			d.markSoldOut(1, 10)
		}
		done := make(chan struct{})
		go func() { defer close(done); _ = d.Run(context.Background()) }()
		testenv.EventuallyOK(t, group+": the redelivered line decided", 20*time.Second, func() error {
			if n := testenv.Metric(t, reg, "seckill_queue_decided_total", map[string]string{"outcome": "redelivered"}); n != float64(len(rns)) {
				// The losers by their FAIL, the winners by their records.
				return fmt.Errorf("decided redelivered %v, want all %d attempts", n, len(rns))
			}
			return nil
		})
		d.Close()
		<-done
		for _, i := range won {
			if r := q.results(t, rns[i:i+1])[0]; r.State == sale.ResultFail {
				t.Errorf("%s: winner %s's result %+v, want no FAIL", group, rns[i], r)
			}
		}
		log.mu.Lock()
		defer log.mu.Unlock()
		for _, g := range log.refused {
			for _, i := range won {
				if strings.HasSuffix(g, rns[i]) {
					t.Errorf("%s: winner %s refused: %q", group, rns[i], g)
				}
			}
		}
		if c := q.counts(t, 1, 10); c.Holders != 5 || c.Remaining != 0 {
			t.Errorf("%s: counts %+v, want the 5 winners' records and nothing left", group, c)
		}
		if n := ordersProduced(t, q.k.Addrs); n != 5 {
			t.Errorf("%s: %d order messages, want 5", group, n)
		}
	}
	// The sold-out mark does not refuse a ticket whose result is gone.
	again("second", true)
	// The sale ends: the script answers ENDED before it reads the buyer's
	// record, and the record still names each winner's own ticket.
	if err := rdb.Do(ctx, rdb.B().Hset().Key(sale.KeysFor(1, 10).Meta).FieldValue().
		FieldValue("end_ms", strconv.FormatInt(time.Now().Add(-time.Minute).UnixMilli(), 10)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	again("third", false)
}

// TestLineTakesNoAttemptTheBrokerRefuses: with the broker gone, Append
// answers ErrBusy within the send timeout, leaves the buyer not waiting
// (the next attempt is not 409) and the ticket FAIL BUSY, so an attempt
// that reaches the topic late after all is not served.
func TestLineTakesNoAttemptTheBrokerRefuses(t *testing.T) {
	q := newQueueRig(t, 1)
	act := activity(1, 10, 5, false)
	act.SKUs[0].Mode = sale.ModeQueue
	a, k := q.preheat(t, act)
	ctx := context.Background()
	q.k.Cluster.Close()
	start := time.Now()
	_, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: 5, Quantity: 1}, time.Now().UnixMilli())
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("append with the broker gone: %v, want ErrBusy", err)
	}
	if took := time.Since(start); took > 2*q.cfg.Kafka.SendTimeout+time.Second {
		t.Fatalf("append took %v", took)
	}
	rdb := q.def.Client(t)
	if n, err := rdb.Do(ctx, rdb.B().Hlen().Key(sale.WaitingKey(1, 10)).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("waiting records after a refused append: %d (%v)", n, err)
	}
	vals, err := rdb.Do(ctx, rdb.B().Hvals().Key(sale.ResultsKey(1, 10)).Build()).AsStrSlice()
	if err != nil || len(vals) != 1 || vals[0] != "FAIL|5||BUSY" {
		t.Fatalf("results after a refused append: %q (%v), want one FAIL BUSY", vals, err)
	}
}

// TestLineSurvivesItsDrainerStopping: a paced line (50/s) whose drainer
// stops mid-line is finished by another drainer of the group: every
// attempt ends, exactly once (the stock taken equals the tickets that
// hold it, one order message each).
func TestLineSurvivesItsDrainerStopping(t *testing.T) {
	q, rns := pacedLine(t)
	q.stopMidway(t, rns, q.drain(t, ""))
	q.drain(t, "")
	q.soldExactly(t, q.settled(t, rns, 30*time.Second), 60)
}

// pacedLine is a line of 80 buyers for SKU 10 of activity 1 (60 units in
// queue mode, drained at 50/s), appended and not yet drained.
func pacedLine(t *testing.T) (*queueRig, []string) {
	t.Helper()
	q := newQueueRig(t, 1)
	act := activity(1, 10, 60, false)
	act.SKUs[0].Mode, act.SKUs[0].Rate = sale.ModeQueue, 50
	a, k := q.preheat(t, act)
	rns := make([]string, 80)
	for i := range rns {
		w, err := q.line.Append(context.Background(), &Request{Activity: a, SKU: k, UserID: int64(100 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		rns[i] = w.RequestNo
	}
	return q, rns
}

// firstDecisions waits until a drainer has decided some of rns.
func (q *queueRig) firstDecisions(t *testing.T, rns []string) {
	t.Helper()
	testenv.EventuallyOK(t, "the first decisions", 20*time.Second, func() error {
		for _, e := range q.results(t, rns) {
			if e.State != sale.ResultWaiting {
				return nil
			}
		}
		return errors.New("all still waiting")
	})
}

// stopMidway calls stop once the line (draining at 50/s) has decided some
// of rns, and checks that it left some waiting.
func (q *queueRig) stopMidway(t *testing.T, rns []string, stop func()) {
	t.Helper()
	q.firstDecisions(t, rns)
	time.Sleep(200 * time.Millisecond)
	stop()
	mid := 0
	for _, e := range q.results(t, rns) {
		if e.State == sale.ResultWaiting {
			mid++
		}
	}
	if mid == 0 || mid == len(rns) {
		t.Fatalf("%d of %d waiting after the first drainer: the test did not stop it mid-way", mid, len(rns))
	}
}

// TestLineSurvivesTheBrokerGoingAway: mid-line the broker closes every
// connection for 3 s (the drainer's fetches and commits, the engine's
// order messages); the line then goes on by itself. Every attempt ends,
// exactly once: the stock taken equals the tickets that hold it, one
// order message each, the rest sold out — none left busy or waiting.
func TestLineSurvivesTheBrokerGoingAway(t *testing.T) {
	q, rns := pacedLine(t)
	q.drain(t, "")
	q.firstDecisions(t, rns)
	var down atomic.Bool
	down.Store(true)
	var refused atomic.Int64
	c := q.k.Cluster
	c.Control(func(kmsg.Request) (kmsg.Response, error, bool) {
		if !down.Load() {
			c.DropControl()
			return nil, nil, false
		}
		c.KeepControl()
		refused.Add(1)
		return nil, errors.New("broker gone"), true // closes the connection
	})
	time.Sleep(3 * time.Second)
	down.Store(false)
	if refused.Load() == 0 {
		t.Fatal("no request reached the broker while it was gone: the test did not cut anything")
	}
	mid := 0
	for _, e := range q.results(t, rns) {
		if e.State == sale.ResultWaiting {
			mid++
		}
	}
	if mid == 0 {
		t.Fatal("the line ended before the broker went away: the test cut nothing mid-line")
	}
	q.soldExactly(t, q.settled(t, rns, 60*time.Second), 60)
}

// TestLineReplacesAWaitingRecordWhoseAppendDied: an edge killed between a
// buyer's waiting record and the attempt leaves a record naming a ticket
// that has no result and is in no line. While an Append could still be
// on its way (twice the send timeout) the buyer is told 409 WAITING; after
// it the record is an orphan: its ticket ends FAIL BUSY (so the attempt,
// should it reach the topic after all, is not served) and the buyer gets
// a place of their own.
func TestLineReplacesAWaitingRecordWhoseAppendDied(t *testing.T) {
	q := newQueueRig(t, 1)
	act := activity(1, 10, 5, false)
	act.SKUs[0].Mode = sale.ModeQueue
	a, k := q.preheat(t, act)
	ctx := context.Background()
	rdb := q.def.Client(t)
	// Ticket numbers as RequestNos makes them: ms since 2024-01-01 << 22.
	numbered := func(at time.Time, seq int64) string {
		rn := fmt.Sprintf("1-10-%d", (at.UnixMilli()-1704067200000)<<22|seq)
		if got, ok := sale.RequestNoTime(rn); !ok || got.UnixMilli() != at.UnixMilli() {
			t.Fatalf("ticket number %s reads as made at %v, want %v", rn, got, at)
		}
		return rn
	}
	for _, c := range []struct {
		name   string
		age    time.Duration
		orphan bool
		user   int64
	}{
		{"an Append that may still be on its way is respected", q.cfg.Kafka.SendTimeout, false, 7},
		{"a record older than any Append is an orphan", 2*q.cfg.Kafka.SendTimeout + time.Second, true, 8},
	} {
		t.Run(c.name, func(t *testing.T) {
			held := numbered(time.Now().Add(-c.age), c.user)
			if err := rdb.Do(ctx, rdb.B().Hset().Key(sale.WaitingKey(1, 10)).FieldValue().FieldValue(strconv.FormatInt(c.user, 10), held).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			w, err := q.line.Append(ctx, &Request{Activity: a, SKU: k, UserID: c.user, Quantity: 1}, time.Now().UnixMilli())
			res, rerr := q.res.Read(ctx, c.user, held)
			switch {
			case !c.orphan && (!errors.Is(err, ErrWaiting) || w.RequestNo != held):
				t.Fatalf("append: %+v %v, want ErrWaiting naming %s", w, err, held)
			case !c.orphan && !errors.Is(rerr, results.ErrNotFound):
				t.Fatalf("the ticket on its way got a result: %+v %v", res, rerr)
			case c.orphan && (err != nil || w.RequestNo == held || w.RequestNo == ""):
				t.Fatalf("append over an orphan: %+v %v, want a place of its own", w, err)
			case c.orphan && (rerr != nil || res.State != sale.ResultFail || res.Code != sale.FailBusy):
				t.Fatalf("the orphan's result: %+v %v, want FAIL BUSY", res, rerr)
			}
		})
	}
}

// TestLineOfAnActivityNewerThanTheDrainersCatalog: an edge that loaded a
// new activity before the drainer's engine did (the engine sidecar
// refreshes its catalog on a period) takes attempts the drainer cannot
// look up yet. They are not poison: the drainer reads the catalog again
// and serves them — none is left WAITING.
func TestLineOfAnActivityNewerThanTheDrainersCatalog(t *testing.T) {
	q := newQueueRig(t, 1)
	act := activity(1, 10, 3, false)
	act.SKUs[0].Mode = sale.ModeQueue
	// Preheated through another process' catalog: the engine's copy does
	// not know the activity.
	edgeCat := catalog.New(q.shards.Default)
	if err := stock.New(q.shards, edgeCat).Preheat(context.Background(), act); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := q.cat.Lookup(1, 10); ok {
		t.Fatal("the engine's catalog knows the activity already: the test shows nothing")
	}
	a, k, _ := edgeCat.Lookup(1, 10)
	rns := make([]string, 5)
	for i := range rns {
		w, err := q.line.Append(context.Background(), &Request{Activity: a, SKU: k, UserID: int64(100 + i), Quantity: 1}, time.Now().UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		rns[i] = w.RequestNo
	}
	q.drain(t, "")
	q.soldExactly(t, q.settled(t, rns, 20*time.Second), 3)
}
