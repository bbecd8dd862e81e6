package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/testenv"
)

// switchProxy forwards TCP connections to an upstream that can change: the
// address a Redis master is known by (a virtual IP or DNS name that an
// operator, Sentinel or a managed service moves to the promoted replica),
// or a replica's link to its master. sever closes every open connection
// and, until the next retarget, refuses new ones (accepts and closes them):
// nothing more flows, and nothing held back is delivered later.
type switchProxy struct {
	ln net.Listener

	mu       sync.Mutex
	upstream string // "" refuses
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

func startSwitchProxy(t testing.TB, upstream string) *switchProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &switchProxy{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *switchProxy) addr() string { return p.ln.Addr().String() }

func (p *switchProxy) port() string {
	_, port, _ := net.SplitHostPort(p.addr())
	return port
}

// sever closes every connection and refuses new ones.
func (p *switchProxy) sever() { p.retarget("") }

// retarget closes every connection; new ones go to upstream.
func (p *switchProxy) retarget(upstream string) {
	p.mu.Lock()
	p.upstream = upstream
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// track adds c to the open connections if the upstream is still up (the
// one c was dialled for); false: close it.
func (p *switchProxy) track(c net.Conn, upstream string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil || p.upstream != upstream || upstream == "" {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *switchProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		up := p.upstream
		p.mu.Unlock()
		if !p.track(c, up) {
			c.Close()
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			u, err := net.DialTimeout("tcp", up, 2*time.Second)
			if err != nil {
				return
			}
			defer u.Close()
			if !p.track(u, up) {
				return
			}
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(u, c); u.Close(); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, u); c.Close(); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func (p *switchProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	p.wg.Wait()
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
// promoted (REPLICAOF NO ONE) and the address moved to it. Buyers 11..14
// buy again (their records went with the master). Then the consumer comes
// back.
//
// Documented outcome: each lost ticket's claim finds no record (NOT_HELD),
// no order is made for it, it ends FAIL RELEASED with the request-log story
// "occupancy released before the order was made", and its unit — never
// taken on the new master — is sold again; buyers 11..14 hold one order
// each, from their second ticket; no oversell; the reconciler finds no
// drift.
func TestFailoverLosesUnreplicated(t *testing.T) {
	ctx := context.Background()
	master := testenv.StartRedis(t)
	link := startSwitchProxy(t, master.Addr)
	replica := testenv.StartRedis(t, testenv.WithRedisArgs("--replicaof", "127.0.0.1", link.port()))
	testenv.EventuallyOK(t, "replica in sync", 15*time.Second, func() error {
		v, err := replInfo(ctx, replica.Addr, "master_link_status")
		if err == nil && v != "up" {
			err = fmt.Errorf("master_link_status %s", v)
		}
		return err
	})
	svc := startSwitchProxy(t, master.Addr)

	sc := beginScenario(t)
	sc.s = startSystem(t, Options{RedisAddr: svc.addr()})
	s := sc.s
	const normal = 30
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
	if n, err := nodeDo(ctx, master.Addr, "WAIT", "1", "5000"); err != nil || n != "1" {
		t.Fatalf("WAIT 1 on the master: %s %v", n, err)
	}
	fr := &faultRun{faultPlan: faultPlan{Name: "the master dies with occupancies its replica never got; the replica is promoted",
		During: healthy, Loss: &redisLoss{SKUs: []int64{skuNormal}}}}
	fr.Injected = time.Now()
	link.sever()
	testenv.EventuallyOK(t, "replica link down", 15*time.Second, func() error {
		v, err := replInfo(ctx, replica.Addr, "master_link_status")
		if err == nil && v != "down" {
			err = fmt.Errorf("master_link_status %s", v)
		}
		return err
	})
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
		onMaster, _ := nodeDo(ctx, master.Addr, "HGET", users, u)
		onReplica, rerr := nodeDo(ctx, replica.Addr, "HGET", users, u)
		if onMaster != tk.RequestNo || !rueidis.IsRedisNil(rerr) {
			t.Fatalf("user %d: record %q on the master, %q (%v) on the replica: want the ticket %s on the master only",
				tk.User, onMaster, onReplica, rerr, tk.RequestNo)
		}
	}
	after, _ := replInfo(ctx, replica.Addr, "slave_repl_offset")
	t.Logf("%d tickets acknowledged by the master only (replica offset %s before, %s after)", lost.accepted(), replOffset, after)

	// 4. The master dies; the replica is promoted; the address moves.
	master.Stop()
	if _, err := nodeDo(ctx, replica.Addr, "REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	svc.retarget(replica.Addr)
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
