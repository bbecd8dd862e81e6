package chaos

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// The fleet's bucketed SKU: one SKU of its own activity, split into
// fleetBuckets buckets pinned on the fleet's two hot shards, sold to the
// last unit by a crowd of its own while TestFleet's membership changes and
// cluster failover run. Its own activity keeps it out of the chaos
// checker's books (which read each SKU's own keys, not its buckets'); this
// file checks it in the real stores instead.

const (
	bucketActivity = 2
	bucketSKUID    = 301
	fleetBuckets   = 4
	// bucketFirstUser is the crowd's first user id, far from the main
	// crowd's.
	bucketFirstUser = 1_000_001
	// bucketUnitsEnv overrides the bucketed SKU's stock (make fleet:
	// 200,000).
	bucketUnitsEnv = "SECKILL_FLEET_BUCKET_UNITS"
	// bucketSaleFor is how long the crowd is paced to take at least, so
	// the cluster master dies mid-sale even for a small SKU.
	bucketSaleFor = 45 * time.Second
)

// bucketUnits is the bucketed SKU's stock: 2,000 in make test and make
// chaos, or $SECKILL_FLEET_BUCKET_UNITS.
func bucketUnits(t *testing.T) int64 {
	t.Helper()
	if v := os.Getenv(bucketUnitsEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 100 {
			t.Fatalf("%s=%q: want a number of units >= 100", bucketUnitsEnv, v)
		}
		return n
	}
	return 2000
}

// bucketBuyer is one buyer of the bucketed SKU and how its tries ended.
type bucketBuyer struct {
	User     int64
	Tries    int
	Status   int    // the final answer: 200, 409 (an earlier try was taken), 410; 0 if none
	Code     string // the final answer's code
	Sent     time.Time
	Answered time.Time
	// Again is the status of a second purchase by an accepted buyer (0:
	// none sent).
	Again int
}

// bucketSale is the bucketed SKU of one fleet run.
type bucketSale struct {
	f      *fleet
	units  int64
	sku    sale.SKU
	buyers []bucketBuyer
	took   time.Duration
	// answers counts every try's answer ("429 REBALANCING", "err", …).
	answersMu sync.Mutex
	answers   map[string]int
	// cpu is each hot shard's redis-server CPU seconds over the run.
	cpu []float64
	// soldOut are the arrivals of every sold-out event of the SKU.
	soldOutMu sync.Mutex
	soldOut   []time.Time
}

// openBuckets creates the bucketed SKU's activity and checks each bucket
// holds its share on the hot shard it is pinned to.
func (f *fleet) openBuckets(units int64) *bucketSale {
	f.t.Helper()
	b := &bucketSale{f: f, units: units, answers: map[string]int{},
		sku: sale.SKU{ID: bucketSKUID, Stock: units, Hot: true, Buckets: fleetBuckets, HotShards: []int{0, 1}}}
	now := time.Now()
	f.preheat(activity{ID: bucketActivity, Start: now.Add(-time.Minute).Truncate(time.Second), End: now.Add(time.Hour).Truncate(time.Second),
		State: stateOnline, SKUs: []skuSpec{{ID: bucketSKUID, Stock: units, Price: "29.90", LimitPerUser: 1, Hot: true,
			Buckets: fleetBuckets, HotShards: b.sku.HotShards}}})
	ctx := context.Background()
	for bk := range fleetBuckets {
		addr := b.shard(bk)
		got, err := nodeDo(ctx, addr, "GET", sale.KeysIn(bucketActivity, bucketSKUID, bk).Stock)
		if err != nil {
			f.t.Fatalf("bucket %d stock on hot shard %s: %v", bk, addr, err)
		}
		if want := b.sku.BucketShare(units, bk); got != strconv.FormatInt(want, 10) {
			f.t.Fatalf("bucket %d on hot shard %s holds %q, want its share %d", bk, addr, got, want)
		}
	}
	return b
}

// shard is the address of the hot shard bucket bk is pinned to.
func (b *bucketSale) shard(bk int) string {
	return b.f.hots[b.sku.HotShards[bk%len(b.sku.HotShards)]].Addr
}

// listen records every sold-out event of the SKU on each cluster node but
// skip (the master that dies): PUBLISH reaches every node of a cluster.
// The returned func stops listening.
func (b *bucketSale) listen(skip string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	want := fmt.Sprintf("%s %d %d ", sale.EventSoldOut, bucketActivity, bucketSKUID)
	for _, n := range b.f.cluster.Nodes {
		if n.Addr == skip {
			continue
		}
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.Addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			b.f.t.Fatalf("subscribe at %s: %v", n.Addr, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = c.Receive(ctx, c.B().Subscribe().Channel(sale.EventsChannel).Build(), func(m rueidis.PubSubMessage) {
				if strings.HasPrefix(m.Message, want) {
					b.soldOutMu.Lock()
					b.soldOut = append(b.soldOut, time.Now())
					b.soldOutMu.Unlock()
				}
			})
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// run sells the SKU: units + 5% buyers (the rest meet the sold-out), paced
// over at least bucketSaleFor, each buyer retrying a busy, rebalancing or
// lost answer at the next edge until it is accepted or sold out; every
// 20th accepted buyer tries again.
func (b *bucketSale) run(ctx context.Context) {
	n := b.units + max(b.units/20, 50)
	b.buyers = make([]bucketBuyer, n)
	for i := range b.buyers {
		b.buyers[i].User = bucketFirstUser + int64(i)
	}
	const workers = 32
	before := b.shardCPU(ctx)
	defer func() {
		after := b.shardCPU(ctx)
		for i := range after {
			b.cpu = append(b.cpu, after[i]-before[i])
		}
	}()
	work := make(chan int)
	var wg sync.WaitGroup
	var done atomic.Int64
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				b.buy(ctx, &b.buyers[i])
				done.Add(1)
			}
		}()
	}
	// A long sale (make fleet) says how far it got.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(30 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				b.f.t.Logf("bucketed SKU: %d of %d buyers done after %v", done.Load(), n, time.Since(start).Round(time.Second))
			case <-stop:
				return
			}
		}
	}()
	interval := bucketSaleFor / time.Duration(n)
	next := time.Now()
dispatch:
	for i := range b.buyers {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		select {
		case work <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(work)
	wg.Wait()
	b.took = time.Since(start)
}

// shardCPU reads each hot shard's used_cpu_user + used_cpu_sys (INFO
// cpu); a shard it cannot read counts 0.
func (b *bucketSale) shardCPU(ctx context.Context) []float64 {
	out := make([]float64, len(b.f.hots))
	for i, h := range b.f.hots {
		info, err := nodeDo(ctx, h.Addr, "INFO", "cpu")
		if err != nil {
			b.f.t.Logf("INFO cpu at hot shard %s: %v", h.Addr, err)
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				if x, err := strconv.ParseFloat(v, 64); err == nil {
					out[i] += x
				}
			}
		}
	}
	return out
}

// buy is one buyer's tries, at most 300, each at the next edge.
func (b *bucketSale) buy(ctx context.Context, x *bucketBuyer) {
	body := []byte(fmt.Sprintf(`{"activityId":%d,"skuId":%d,"quantity":1}`, bucketActivity, bucketSKUID))
	edges := b.f.edgeAddrs
	for x.Tries < 300 && ctx.Err() == nil {
		url := "http://" + edges[(x.User+int64(x.Tries))%int64(len(edges))] + "/api/v1/flash-sale/order"
		x.Tries++
		x.Sent = time.Now()
		st, code, retry := b.try(url, x.User, body)
		x.Answered = time.Now()
		switch st {
		case 200, 409, 410:
			x.Status, x.Code = st, code
			if st == 200 && x.User%20 == 0 {
				x.Again, _, _ = b.try(url, x.User, body)
			}
			return
		}
		time.Sleep(retry)
	}
}

// try sends one purchase: its status (0: no answer), code and the wait
// before a retry (Retry-After, at most a second; else 100ms).
func (b *bucketSale) try(url string, user int64, body []byte) (int, string, time.Duration) {
	st, resp, hdr, err := b.f.doHeader("POST", url, user, body, nil)
	key := "err"
	code := ""
	if err == nil {
		if i := strings.Index(string(resp), `"code":"`); i >= 0 {
			code, _, _ = strings.Cut(string(resp[i+8:]), `"`)
		}
		key = fmt.Sprintf("%d %s", st, code)
	}
	b.answersMu.Lock()
	b.answers[key]++
	b.answersMu.Unlock()
	wait := 100 * time.Millisecond
	if ra, perr := strconv.Atoi(hdr.Get("Retry-After")); err == nil && perr == nil && ra >= 1 {
		wait = time.Second
	}
	return st, code, wait
}

// check waits for the orders and checks the SKU in the real stores:
// exactly units orders, one per buyer, each of a buyer told 200 or 409;
// every bucket empty, its sold and records adding up, no transfer in
// flight, each record in its buyer's bucket; the sold-out event only after
// the last accepted try was sent, no 410 before; no second 200 for anyone;
// and the cluster master's replica took over while the SKU still sold.
func (b *bucketSale) check(failedOver time.Time) {
	f := b.f
	ctx := context.Background()
	accepted, told := map[int64]bool{}, map[int64]bool{}
	var lastAccept, firstGone time.Time
	var again200, unanswered, tries int
	for i := range b.buyers {
		x := &b.buyers[i]
		tries += x.Tries
		switch x.Status {
		case 200:
			accepted[x.User], told[x.User] = true, true
			if x.Sent.After(lastAccept) {
				lastAccept = x.Sent
			}
		case 409:
			told[x.User] = true
		case 410:
			if firstGone.IsZero() || x.Answered.Before(firstGone) {
				firstGone = x.Answered
			}
		default:
			unanswered++
		}
		if x.Again == 200 {
			again200++
		}
	}
	f.expect("bucketed SKU: every buyer was answered accepted or sold out", unanswered == 0,
		"%d of %d buyers had no final answer after their tries", unanswered, len(b.buyers))
	f.expect("bucketed SKU: no buyer was accepted twice", again200 == 0, "%d second purchases answered 200", again200)

	// Wait for the orders, then judge what is there: a short sale still
	// gets every verdict below.
	var orders, users int64
	for deadline := time.Now().Add(30*time.Second + time.Duration(b.units)*time.Millisecond); ; time.Sleep(200 * time.Millisecond) {
		err := f.db.QueryRowContext(ctx, `SELECT COUNT(*), COUNT(DISTINCT user_id) FROM seckill_order
			WHERE activity_id = ? AND sku_id = ? AND status <> ?`, bucketActivity, bucketSKUID, orderClosed).Scan(&orders, &users)
		if err != nil {
			f.t.Fatalf("count the bucketed SKU's orders: %v", err)
		}
		if orders >= b.units || time.Now().After(deadline) {
			break
		}
	}
	f.expect("bucketed SKU: exactly its units in orders, one per buyer", orders == b.units && users == b.units,
		"%d orders of %d buyers for %d units", orders, users, b.units)
	rows, err := f.db.QueryContext(ctx, `SELECT user_id FROM seckill_order WHERE activity_id = ? AND sku_id = ?`, bucketActivity, bucketSKUID)
	if err != nil {
		f.t.Fatal(err)
	}
	var strangers []int64
	ordered := map[int64]bool{}
	for rows.Next() {
		var u int64
		if err := rows.Scan(&u); err != nil {
			f.t.Fatal(err)
		}
		ordered[u] = true
		if !told[u] {
			strangers = append(strangers, u)
		}
	}
	if err := rows.Err(); err != nil {
		f.t.Fatal(err)
	}
	rows.Close()
	var lost []int64
	for u := range accepted {
		if !ordered[u] {
			lost = append(lost, u)
		}
	}
	f.expect("bucketed SKU: every order is of a buyer told 200 or 409", len(strangers) == 0, "orders of %v", head(strangers, 5))
	f.expect("bucketed SKU: every buyer told 200 has an order", len(lost) == 0, "no order for %v", head(lost, 5))

	var stock, sold, records int64
	var inFlight, misplaced []string
	for bk := range fleetBuckets {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{b.shard(bk)}, DisableCache: true})
		if err != nil {
			f.t.Fatal(err)
		}
		k := sale.KeysIn(bucketActivity, bucketSKUID, bk)
		rs := c.DoMulti(ctx, c.B().Get().Key(k.Stock).Build(), c.B().Get().Key(k.Sold).Build(),
			c.B().Hkeys().Key(k.Users).Build(), c.B().Hkeys().Key(sale.TransfersKey(bucketActivity, bucketSKUID, bk)).Build())
		st, err := rs[0].AsInt64()
		if err != nil {
			f.t.Fatalf("bucket %d stock: %v", bk, err)
		}
		so, err := rs[1].AsInt64()
		if err != nil {
			f.t.Fatalf("bucket %d sold: %v", bk, err)
		}
		us, err := rs[2].AsStrSlice()
		if err != nil {
			f.t.Fatalf("bucket %d users: %v", bk, err)
		}
		xf, err := rs[3].AsStrSlice()
		if err != nil {
			f.t.Fatalf("bucket %d transfers: %v", bk, err)
		}
		c.Close()
		f.t.Logf("bucket %d on %s: stock %d, sold %d, %d records, %d transfer fields", bk, b.shard(bk), st, so, len(us), len(xf))
		stock, sold, records = stock+st, sold+so, records+int64(len(us))
		for _, fl := range xf {
			if strings.HasPrefix(fl, "f:") {
				inFlight = append(inFlight, fmt.Sprintf("bucket %d %s", bk, fl))
			}
		}
		for _, u := range us {
			id, err := strconv.ParseInt(u, 10, 64)
			if err != nil || b.sku.BucketOf(id) != bk {
				misplaced = append(misplaced, fmt.Sprintf("user %s in bucket %d", u, bk))
			}
		}
	}
	f.expect("bucketed SKU: the sum of its buckets is 0", stock == 0, "buckets hold %d units", stock)
	f.expect("bucketed SKU: the buckets' sold and records add up to its units", sold == b.units && records == b.units,
		"sold %d, %d records, %d units", sold, records, b.units)
	f.expect("bucketed SKU: no transfer in flight", len(inFlight) == 0, "%v", head(inFlight, 5))
	f.expect("bucketed SKU: each buyer's record is in its own bucket", len(misplaced) == 0, "%v", head(misplaced, 5))

	b.soldOutMu.Lock()
	events := append([]time.Time(nil), b.soldOut...)
	b.soldOutMu.Unlock()
	f.expect("bucketed SKU: its sold-out event arrived", len(events) > 0, "%d sold-out events on %s", len(events), sale.EventsChannel)
	if len(events) > 0 {
		first := events[0]
		for _, e := range events {
			if e.Before(first) {
				first = e
			}
		}
		f.expect("bucketed SKU: sold out only after the last accepted try was sent", first.After(lastAccept),
			"sold-out event at %s, last accepted try sent %s", clock(first), clock(lastAccept))
		f.t.Logf("bucketed SKU: %d sold-out events, the first at %s; the last accepted try sent %s (event %v after it)",
			len(events), clock(first), clock(lastAccept), first.Sub(lastAccept).Round(time.Millisecond))
	}
	f.expect("bucketed SKU: no buyer told 410 before the last accepted try was sent", firstGone.IsZero() || firstGone.After(lastAccept),
		"first 410 answered %s, last accepted try sent %s", clock(firstGone), clock(lastAccept))
	f.expect("bucketed SKU: the cluster master failed over while it still sold", !failedOver.IsZero() && failedOver.Before(lastAccept),
		"replica took over %s, last accepted try sent %s", clock(failedOver), clock(lastAccept))

	b.answersMu.Lock()
	f.t.Logf("bucketed SKU: %d units over %d buckets on hot shards %v: %d buyers, %d tries in %v (%.0f accepted/s); answers %v",
		b.units, fleetBuckets, b.sku.HotShards, len(b.buyers), tries, b.took.Round(time.Millisecond),
		float64(len(accepted))/b.took.Seconds(), b.answers)
	b.answersMu.Unlock()
	for i, c := range b.cpu {
		f.t.Logf("bucketed SKU: hot shard %d redis-server CPU %.2fs over the run, %.1f µs per accepted buyer (the main crowd's hot SKU shares it)",
			i, c, c*1e6/float64(max(len(accepted), 1)))
	}
}
