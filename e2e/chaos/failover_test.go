package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/faultproxy"
	"seckill/internal/testenv"
)

// failoverPair is a Redis master with one replica, whose link to the
// master runs through a proxy the test can cut, and the address the
// processes know the master by (svc), which moves to the replica when it
// is promoted.
type failoverPair struct {
	t               testing.TB
	master, replica *testenv.Redis
	link, svc       *faultproxy.Proxy
}

func startFailoverPair(t testing.TB) *failoverPair {
	t.Helper()
	ctx := context.Background()
	p := &failoverPair{t: t, master: testenv.StartRedis(t)}
	p.link = startProxy(t, p.master.Addr)
	p.replica = testenv.StartRedis(t, testenv.WithRedisArgs("--replicaof", "127.0.0.1", portOf(p.link.Addr())))
	testenv.EventuallyOK(t, "replica in sync", 15*time.Second, func() error {
		v, err := replInfo(ctx, p.replica.Addr, "master_link_status")
		if err == nil && v != "up" {
			err = fmt.Errorf("master_link_status %s", v)
		}
		return err
	})
	p.svc = startProxy(t, p.master.Addr)
	return p
}

// cut makes sure the replica holds every write so far (WAIT), then cuts
// its link and waits until it says so: from here on the master's writes
// are its own.
func (p *failoverPair) cut() {
	p.t.Helper()
	ctx := context.Background()
	if n, err := nodeDo(ctx, p.master.Addr, "WAIT", "1", "5000"); err != nil || n != "1" {
		p.t.Fatalf("WAIT 1 on the master: %s %v", n, err)
	}
	p.link.Refuse()
	testenv.EventuallyOK(p.t, "replica link down", 15*time.Second, func() error {
		v, err := replInfo(ctx, p.replica.Addr, "master_link_status")
		if err == nil && v != "down" {
			err = fmt.Errorf("master_link_status %s", v)
		}
		return err
	})
}

// failover SIGKILLs the master, promotes the replica and moves the
// processes' address to it.
func (p *failoverPair) failover() {
	p.t.Helper()
	p.master.Stop()
	if _, err := nodeDo(context.Background(), p.replica.Addr, "REPLICAOF", "NO", "ONE"); err != nil {
		p.t.Fatal(err)
	}
	p.svc.Retarget(p.replica.Addr)
}

// replInfo reads a field of INFO replication on the server at addr.
func replInfo(ctx context.Context, addr, field string) (string, error) {
	s, err := nodeDo(ctx, addr, "INFO", "replication")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("INFO replication of %s has no %s", addr, field)
}

// TestFailoverLosesUnreplicated makes a Redis failover lose what DESIGN
// "What a Redis failover can lose" says it can — occupancies and QUEUING
// results the master acknowledged and never sent to its replica — on a
// real master and replica, deterministically, and checks the documented
// outcome end to end.
//
// The default Redis is a master with one replica; the processes know it by
// an address that moves (a proxy, as a virtual IP or a managed service's
// endpoint would be). Buyers 1..10 buy and their orders are made; the
// consumer stops, so the next tickets wait in Kafka; the replica is in
// sync (WAIT), then its link to the master is cut. Buyers 11..18 buy: the
// master occupies and answers 200 QUEUING, the broker has their messages,
// the replica has none of it. The master is SIGKILLed, the replica
// promoted (REPLICAOF NO ONE) and the address moved to it; the processes'
// broken connections may answer 503 BUSY until they redialled, so probe
// buyers try until thirty in a row are accepted. Buyers 11..14 buy again
// (their records went with the master). Then the consumer comes back.
//
// Documented outcome: each lost ticket's claim finds no record (NOT_HELD),
// no order is made for it, it ends FAIL RELEASED with the request-log story
// "occupancy released before the order was made", and its unit — never
// taken on the new master — is sold again; buyers 11..14 hold one order
// each, from their second ticket; no oversell; the reconciler finds no
// drift.
func TestFailoverLosesUnreplicated(t *testing.T) {
	ctx := context.Background()
	pair := startFailoverPair(t)
	master, replica := pair.master, pair.replica

	sc := beginScenario(t)
	sc.s = startSystem(t, Options{RedisAddr: pair.svc.Addr()})
	s := sc.s
	// Stock for buyers 1..18, the probes and the second tickets.
	const probesInRow, normal = 30, 100
	skus := map[int64]int64{skuNormal: normal, skuHot: 10}
	sc.open(skus)
	buy := func(first int64, users int) *Run {
		return s.buy(ctx, LoadSpec{Users: users, FirstUser: first, HotFrac: 0, Rate: 20, Workers: 4, Seed: 3})
	}

	// 1. A healthy sale: orders for buyers 1..10.
	run := buy(1, 10)
	s.quiesce(run, skus, 30*time.Second)

	// 2. The consumer stops; the replica has everything so far; its link
	// is cut and seen down.
	s.Consumer.kill(syscall.SIGTERM)
	fr := &faultRun{faultPlan: faultPlan{Name: "the master dies with occupancies its replica never got; the replica is promoted",
		During: busy, Loss: &redisLoss{SKUs: []int64{skuNormal}}}}
	fr.Injected = time.Now()
	pair.cut()
	replOffset, _ := replInfo(ctx, replica.Addr, "slave_repl_offset")

	// 3. Buyers 11..18: acknowledged by the master only.
	lost := buy(11, 8)
	if lost.accepted() != 8 {
		t.Fatalf("buyers 11..18 got %s, want 8 × 200 QUEUING", lost.summary())
	}
	run.add(lost.Attempts...)
	users := keysOf(activityID, skuNormal).Users
	for _, tk := range lost.Tickets {
		u := strconv.FormatInt(tk.User, 10)
		onMaster, err := nodeDo(ctx, master.Addr, "HGET", users, u)
		if err != nil {
			t.Fatalf("user %d: the master's record: %v", tk.User, err)
		}
		onReplica, rerr := nodeDo(ctx, replica.Addr, "HGET", users, u)
		if onMaster != tk.RequestNo || !rueidis.IsRedisNil(rerr) {
			t.Fatalf("user %d: record %q on the master, %q (%v) on the replica: want the ticket %s on the master only",
				tk.User, onMaster, onReplica, rerr, tk.RequestNo)
		}
	}
	after, _ := replInfo(ctx, replica.Addr, "slave_repl_offset")
	t.Logf("%d tickets acknowledged by the master only (replica offset %s before, %s after)", lost.accepted(), replOffset, after)

	// 4. The master dies; the replica is promoted; the address moves.
	pair.failover()
	// The processes' connections to the dead master broke with it: the
	// first call on each may fail (503 BUSY) before the client redials
	// it. A client holds several pipelined connections and picks one at
	// random per command, so a short run of successes can miss one that
	// is still broken: probe buyers (new users) try until thirty in a row
	// are accepted through the promoted replica (a connection the run
	// never touched: under (3/4)^30 per connection of four).
	var probes []attempt
	inRow := 0
	testenv.EventuallyOK(t, "thirty purchases in a row accepted through the promoted replica", 30*time.Second, func() error {
		a := attempt{User: int64(900 + len(probes)), SKU: skuNormal}
		s.attempt(&a)
		probes = append(probes, a)
		if a.Status != 200 {
			inRow = 0
			return fmt.Errorf("%s %s", a.answer(), a.Err)
		}
		if inRow++; inRow < probesInRow {
			return errNotYet
		}
		return nil
	})
	run.add(probes...)
	fr.Healed = time.Now()
	fr.Loss.Until = fr.Healed

	// While the consumer is away, a lost ticket's buyer polls: the new
	// master has no result and the database no order yet.
	var one ticket
	for _, tk := range lost.Tickets {
		one = tk
		break
	}
	testenv.EventuallyOK(t, "the edge reaches the promoted replica", 15*time.Second, func() error {
		st, body, err := s.get("/api/v1/flash-sale/result/"+one.RequestNo, one.User)
		if err == nil && st != 404 {
			err = fmt.Errorf("%d %s", st, body)
		}
		return err
	})

	// 5. Buyers 11..14 buy again, on the new master.
	again := buy(11, 4)
	s.expect("buyers whose tickets the master took along buy again on the new master", again.accepted() == 4,
		"buyers 11..14 got %s", again.summary())
	run.add(again.Attempts...)
	if err := s.restart(s.Consumer, nil); err != nil {
		t.Fatal(err)
	}
	run.Fault = fr
	sc.finish(run)

	// 6. Each lost ticket's documented end.
	b, err := s.readBooks(skus)
	if err != nil {
		t.Fatal(err)
	}
	live, _ := b.liveOrders()
	perUser := map[int64]int{}
	for _, o := range live {
		perUser[o.User]++
	}
	for _, tk := range lost.Tickets {
		res, l := b.Results[tk.RequestNo], b.Log[tk.RequestNo]
		_, ordered := live[tk.RequestNo]
		ok := res[fieldState] == stateFail && res[fieldCode] == failReleased && !ordered &&
			l.Status == "FAILED" && l.Remark == lossStories[0].remark
		s.t.Logf("lost ticket %s of user %d: result %s %s, log %s %q, order %v", tk.RequestNo, tk.User,
			res[fieldState], res[fieldCode], l.Status, l.Remark, ordered)
		if !ok {
			t.Errorf("lost ticket %s of user %d: result %v, log %+v, order %v; want FAIL RELEASED, FAILED %q, no order",
				tk.RequestNo, tk.User, res, l, ordered, lossStories[0].remark)
		}
		want := 0
		if tk.User <= 14 {
			want = 1 // from the second ticket
		}
		if perUser[tk.User] != want {
			t.Errorf("user %d holds %d live orders, want %d", tk.User, perUser[tk.User], want)
		}
	}
}

// TestFailoverLosesClaimsAndResults: the other side of the window — the
// master dies after the consumer claimed tickets and wrote their SUCCESS
// results, before its replica got the claims and the results (it had the
// occupancies and their QUEUING results). The orders are in the database;
// on the promoted replica each ticket's record is back unclaimed (and in
// the sweeper's index) and its result says QUEUING again.
//
// Documented outcome (DESIGN "What a Redis failover can lose", the claim
// and result rows): one live order per ticket and buyer, nothing
// released — the sweeper finds each order and leaves its record alone,
// for longer than the orphan grace — the ledger adds up and the
// reconciler reports zero drift; a buyer who tries again is told
// DUPLICATE; and the buyer's poll, once the ticket is older than the
// orphan grace and Kafka proves it consumed, is settled against the
// database: SUCCESS with the order's number, written back to the promoted
// replica (the result row; reconcile.Settle).
func TestFailoverLosesClaimsAndResults(t *testing.T) {
	ctx := context.Background()
	pair := startFailoverPair(t)
	s := startSystem(t, Options{RedisAddr: pair.svc.Addr()})
	const normal = 30
	skus := map[int64]int64{skuNormal: normal, skuHot: 10}
	s.preheat(saleActivity(skus[skuNormal], skus[skuHot]))

	// Tickets accepted while the consumer is away: occupancies (each
	// buyer's record, its QUEUING) on the master, then on the replica too.
	s.Consumer.kill(syscall.SIGTERM)
	run := s.buy(ctx, LoadSpec{Users: 6, HotFrac: 0, Rate: 20, Workers: 4, Seed: 5})
	if run.accepted() != 6 {
		t.Fatalf("buyers 1..6 got %s, want 6 × 200 QUEUING", run.summary())
	}
	pair.cut()

	// The consumer claims them and writes their orders and results: on
	// the master alone.
	if err := s.restart(s.Consumer, nil); err != nil {
		t.Fatal(err)
	}
	s.quiesce(run, skus, 30*time.Second)
	k := keysOf(activityID, skuNormal)
	claimed, err := nodeDo(ctx, pair.master.Addr, "SCARD", k.Claimed)
	if err != nil || claimed != "6" {
		t.Fatalf("claims on the master: %s %v, want 6", claimed, err)
	}
	pair.failover()

	// On the promoted replica: records, no claims, no results (each
	// ticket reads QUEUING from its buyer's record).
	onReplica, err := nodeDo(ctx, pair.replica.Addr, "SCARD", k.Claimed)
	if err != nil || onReplica != "0" {
		t.Fatalf("claims on the promoted replica: %s %v, want 0", onReplica, err)
	}
	for rn, tk := range run.Tickets {
		if v, err := nodeDo(ctx, pair.replica.Addr, "HGET", k.Results, rn); err == nil || !rueidis.IsRedisNil(err) {
			t.Fatalf("result of %s on the promoted replica: %q %v, want none", rn, v, err)
		}
		if v, err := nodeDo(ctx, pair.replica.Addr, "HGET", k.Users, strconv.FormatInt(tk.User, 10)); err != nil || v != rn {
			t.Fatalf("record of user %d on the promoted replica: %q %v, want %s", tk.User, v, err, rn)
		}
	}

	// Longer than the orphan grace (5s) and a few sweeps (1s): nothing
	// may release a ticket whose order exists.
	time.Sleep(8 * time.Second)
	b, err := s.readBooks(skus)
	if err != nil {
		t.Fatal(err)
	}
	sb := b.SKUs[skuNormal]
	live, _ := b.liveOrders()
	if sb.LiveUnits != 6 || sb.Stock != normal-6 || sb.Sold != 6 || len(sb.Users) != 6 || len(sb.Claimed) != 0 {
		t.Errorf("after the failover: %d order units, stock %d, sold %d, %d records, %d claims; want 6, %d, 6, 6, 0",
			sb.LiveUnits, sb.Stock, sb.Sold, len(sb.Users), len(sb.Claimed), normal-6)
	}
	for rn, tk := range run.Tickets {
		o, ok := live[rn]
		if !ok || o.User != tk.User {
			t.Errorf("ticket %s of user %d: no live order of its own (%+v)", rn, tk.User, o)
		}
		if got := sb.Users[strconv.FormatInt(tk.User, 10)]; got != rn {
			t.Errorf("user %d: record %q, want the ticket %s (released?)", tk.User, got, rn)
		}
		st, body, err := s.get("/api/v1/flash-sale/result/"+rn, tk.User)
		t.Logf("ticket %s of user %d: order %s; the buyer's poll answers %d %s", rn, tk.User, o.OrderNo, st, body)
		if err != nil || st != 200 || !strings.Contains(string(body), `"code":"SUCCESS"`) ||
			!strings.Contains(string(body), o.OrderNo) {
			t.Errorf("poll of %s: %d %s %v; want SUCCESS with order %s (the stale QUEUING settled)", rn, st, body, err, o.OrderNo)
		}
		if v, err := nodeDo(ctx, pair.replica.Addr, "HGET", k.Results, rn); err != nil || !strings.HasPrefix(v, "SUCCESS|") {
			t.Errorf("result of %s on the promoted replica after the poll: %s %v, want SUCCESS written back", rn, v, err)
		}
	}
	st, body, err := s.admin("POST", "/admin/v1/reconcile", nil)
	var rep reconReport
	if err == nil && st == 200 {
		err = json.Unmarshal(body, &rep)
	}
	if err != nil || st != 200 || rep.Drifts != 0 {
		t.Errorf("reconcile: %d %s %v, want 200 and zero drift", st, trim(body), err)
	}
	// A buyer who tries again is told the ticket it holds.
	again := s.buy(ctx, LoadSpec{Users: 2, HotFrac: 0, Rate: 20, Workers: 2, Seed: 5})
	if again.Statuses["409 DUPLICATE"] != 2 {
		t.Errorf("buyers 1..2 trying again got %s, want 409 DUPLICATE", again.summary())
	}
}

// portOf is the port of a host:port.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
