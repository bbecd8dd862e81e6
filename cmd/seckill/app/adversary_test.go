package app

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
)

// TestAdversarialTrafficKeepsTheBooks sends a few thousand hostile
// requests — random and mutated bodies, ids and trace ids of any bytes,
// bad users and content types — through the real edge, engine and
// consumer (real Redis, kfake, SQLite), and forged, mutated, unsigned and
// oversized messages straight onto the orders topic. Afterwards the books
// hold: every 200 ends SUCCESS or FAIL, nothing stays QUEUING, no SKU is
// oversold, and every unit not in an order is back on sale, in Redis and
// in the database alike. SECKILL_ADVERSARY_SEED replays a run (the seed is
// logged); SECKILL_ADVERSARY_N sets the number of requests.
func TestAdversarialTrafficKeepsTheBooks(t *testing.T) {
	seed := uint64(20)
	if s := os.Getenv("SECKILL_ADVERSARY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SECKILL_ADVERSARY_SEED: %v", err)
		}
		seed = v
	}
	n := 2000
	if s := os.Getenv("SECKILL_ADVERSARY_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("SECKILL_ADVERSARY_N: %v", err)
		}
		n = v
	}
	t.Logf("seed %d, %d requests (SECKILL_ADVERSARY_SEED=%d replays)", seed, n, seed)

	c := startClusterWith(t, sqliteOnly(), crowdBudgets)
	act := openActivity(1, sale.SKU{ID: 1001, Stock: 40, Price: 9900, LimitPerUser: 1},
		sale.SKU{ID: 1002, Stock: 25, Price: 150, LimitPerUser: 3})
	c.preheat(t, act)
	addr := strings.TrimPrefix(c.base, "http://")
	// Lies on the orders topic first, on every partition, so the genuine
	// messages of the traffic queue up behind them.
	lies := produceHostile(t, c, seed)

	type accepted struct {
		rn   string
		user int64
	}
	var (
		mu       sync.Mutex
		tickets  []accepted
		statuses = map[int]int{}
	)
	work := make(chan int)
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				user, raw := hostileRequest(r)
				status, body, err := rawExchange(addr, raw)
				if err != nil {
					t.Errorf("worker %d request %d: %v", w, i, err)
					return
				}
				mu.Lock()
				statuses[status]++
				if status == 200 {
					var a struct {
						Code      string `json:"code"`
						RequestNo string `json:"requestNo"`
					}
					if err := json.Unmarshal(body, &a); err != nil || a.Code != sale.ResultQueuing || a.RequestNo == "" {
						t.Errorf("request %d: 200 %q", i, body)
					}
					tickets = append(tickets, accepted{a.RequestNo, user})
				}
				if status >= 500 && status != 503 {
					t.Errorf("request %d answered %d %q:\n%q", i, status, body, raw)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("answers %v, %d tickets", statuses, len(tickets))
	if len(tickets) == 0 {
		t.Fatal("no request was accepted: the generator tests nothing")
	}

	ctx := context.Background()
	pending := map[string]bool{}
	owner := map[string]int64{}
	for _, tk := range tickets {
		pending[tk.rn] = true
		owner[tk.rn] = tk.user
	}
	testenv.EventuallyOK(t, "every accepted ticket ended", 60*time.Second, func() error {
		for rn := range pending {
			e, err := c.sys.Results.Read(ctx, owner[rn], rn)
			if err != nil && !errors.Is(err, results.ErrNotFound) {
				t.Fatal(err)
			}
			if err != nil || e.State == sale.ResultQueuing {
				return fmt.Errorf("ticket %s still queuing (%d left)", rn, len(pending))
			}
			// The units were occupied and the database's snapshot matches
			// Redis: a genuine ticket has no reason to fail, and is never
			// dead-lettered as forged.
			if e.State != sale.ResultSuccess {
				t.Fatalf("ticket %s ended %+v, want SUCCESS", rn, e)
			}
			delete(pending, rn)
		}
		return nil
	})

	if got := testenv.Metric(t, c.sys.Reg, "seckill_consumer_messages_total", map[string]string{"outcome": "dlq"}); got != float64(lies) {
		t.Errorf("%v messages dead-lettered, want the %d lies", got, lies)
	}

	// The books: per SKU, units in live orders never exceed the stock and
	// everything else is back on sale; no ticket is held without an order.
	db := c.db(t)
	testenv.EventuallyOK(t, "the books balance", 30*time.Second, func() error {
		for _, k := range act.SKUs {
			var orders, units, users int64
			if err := db.QueryRow(`SELECT COUNT(*), COALESCE(SUM(quantity), 0), COUNT(DISTINCT user_id) FROM seckill_order
				WHERE activity_id = ? AND sku_id = ? AND status <> 'CLOSED'`, act.ID, k.ID).Scan(&orders, &units, &users); err != nil {
				t.Fatal(err)
			}
			if units > k.Stock || users != orders {
				t.Fatalf("sku %d: %d orders of %d units for %d users, stock %d", k.ID, orders, units, users, k.Stock)
			}
			var available, sold int64
			if err := db.QueryRow(`SELECT available, sold FROM seckill_stock_snapshot WHERE activity_id = ? AND sku_id = ?`,
				act.ID, k.ID).Scan(&available, &sold); err != nil {
				t.Fatal(err)
			}
			if sold != units || available != k.Stock-units {
				t.Fatalf("sku %d snapshot available %d sold %d, orders hold %d of %d", k.ID, available, sold, units, k.Stock)
			}
			got, err := c.sys.Stock.Counts(ctx, act.ID, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Remaining+units != k.Stock || got.Sold != units || got.Pending != 0 || got.Holders != orders || got.Claimed != orders {
				return fmt.Errorf("sku %d: redis %+v, orders %d of %d units, stock %d", k.ID, got, orders, units, k.Stock)
			}
		}
		return nil
	})
}

// rawExchange sends raw on a fresh connection and reads one response: no
// client library between the generator and the edge, so header bytes a
// client would refuse reach it.
func rawExchange(addr string, raw []byte) (int, []byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write(raw); err != nil {
		return 0, nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("read response to %q: %w", raw, err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, []byte(b.String()), nil
}

// hostileRequest builds one raw request to the order route and names its
// user (0 when the X-User-Id is not a valid one).
func hostileRequest(r *rand.Rand) (int64, []byte) {
	user := int64(1 + r.IntN(400))
	userHdr := strconv.FormatInt(user, 10)
	switch r.IntN(12) {
	case 0:
		userHdr, user = hostileText(r, 24, false), 0
	case 1:
		userHdr, user = "-"+userHdr, 0
	}
	sku := []string{"1001", "1002", `"1001"`, "1003", "0", "-1", "1e3", "99999999999999999999", "null", `"x"`}[r.IntN(10)]
	if r.IntN(3) > 0 {
		sku = []string{"1001", "1002"}[r.IntN(2)]
	}
	fields := []string{`"skuId":` + sku}
	if r.IntN(3) == 0 {
		fields = append(fields, `"quantity":`+[]string{"1", "2", "3", "4", "0", "101", "1.5", `"2"`, "[]"}[r.IntN(9)])
	}
	if r.IntN(2) == 0 {
		fields = append(fields, `"requestId":`+jsonish(r))
	}
	if r.IntN(4) == 0 {
		fields = append(fields, `"activityId":`+[]string{"1", "2", `"1"`, "0", "-1"}[r.IntN(5)])
	}
	if r.IntN(5) == 0 {
		fields = append(fields, `"extra":{"a":[1,"`+hostileText(r, 8, true)+`",null]}`)
	}
	if r.IntN(8) == 0 {
		fields = append(fields, fields[0]) // a duplicate key
	}
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	body := []byte("{" + strings.Join(fields, ",") + "}")
	switch r.IntN(10) {
	case 0: // flip bytes
		for range 1 + r.IntN(3) {
			body[r.IntN(len(body))] ^= byte(1 + r.IntN(255))
		}
	case 1: // cut short
		body = body[:r.IntN(len(body))]
	case 2: // garbage
		body = []byte(hostileText(r, 64, false))
	}
	var h strings.Builder
	h.WriteString("POST /api/v1/flash-sale/order HTTP/1.1\r\nHost: edge\r\nConnection: close\r\n")
	h.WriteString("X-User-Id: " + userHdr + "\r\n")
	ct := "application/json"
	if r.IntN(15) == 0 {
		ct = []string{"text/plain", "application/x-www-form-urlencoded", "application/json; charset=\xff"}[r.IntN(3)]
	}
	h.WriteString("Content-Type: " + ct + "\r\n")
	if r.IntN(2) == 0 {
		h.WriteString("X-Trace-Id: " + hostileText(r, 80, false) + "\r\n")
	}
	h.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n")
	return user, append([]byte(h.String()), body...)
}

// hostileText is up to n random bytes of any value but CR and LF (which
// would end a header line); quotes and backslashes only when inJSON is
// false.
func hostileText(r *rand.Rand, n int, inJSON bool) string {
	b := make([]byte, r.IntN(n+1))
	pool := []string{"a", "Z", "9", "-", " ", "\x00", "\x01", "\x7f", "\x80", "\xff", "\xc3", "é", "€", "😀", "\u2028", "\t", `"`, `\`, "<", "&"}
	out := b[:0]
	for range cap(b) {
		p := pool[r.IntN(len(pool))]
		if inJSON && (p == `"` || p == `\` || p[0] < 0x20) {
			p = "q"
		}
		out = append(out, p...)
	}
	return string(out)
}

// jsonish is a JSON-ish string value: escapes, raw bytes of any kind, or
// not a string at all.
func jsonish(r *rand.Rand) string {
	switch r.IntN(6) {
	case 0:
		return `"` + []string{`\u0000`, `\ud800`, `\ud83d\ude00`, `\u0085`, `\"`, `\\`, `\n`, `\u00e9`}[r.IntN(8)] + `x"`
	case 1:
		return []string{"5", "null", "true", "[]", "{}"}[r.IntN(5)]
	case 2:
		return `"` + strings.Repeat("r", 60+r.IntN(10)) + `"`
	}
	return `"` + hostileText(r, 20, true) + `"`
}

// produceHostile writes lies onto every partition of the orders topic: an
// unsigned message claiming 3 units at 0.01, a signed one with one byte
// changed, garbage, and a value too big for a dead letter as it is. It
// returns how many it wrote.
func produceHostile(t *testing.T, c *cluster, seed uint64) int {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1<<40))
	pc := sarama.NewConfig()
	pc.Producer.Return.Successes = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.MaxMessageBytes = 2 << 20
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(c.kafka.Addrs, pc)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	signer, err := sale.NewSigner(testOrderSigning)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for part := range int32(4) { // startClusterWith's partitions
		m := sale.Message{RequestNo: "1-1001-" + strconv.Itoa(1000+int(part)), ActivityID: 1, SKUID: 1001, UserID: 7, Quantity: 3,
			UnitPrice: 1, AcceptedAt: time.Now().UnixMilli(), TraceID: "forged"}
		edited := signer.AppendSigned(nil, &m)
		edited[r.IntN(len(edited))] ^= byte(1 + r.IntN(255))
		for _, v := range [][]byte{m.Encode(nil), edited, []byte(hostileText(r, 200, false)), []byte(strings.Repeat("x", 1_048_000))} {
			if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: sale.OrdersTopic, Partition: part,
				Key: sarama.StringEncoder("7"), Value: sarama.ByteEncoder(v)}); err != nil {
				t.Fatalf("produce %d bytes: %v", len(v), err)
			}
			n++
		}
	}
	return n
}
