package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap/zaptest"

	"seckill/cmd/seckill/config"
	"seckill/engine"
	"seckill/internal/shard"
	"seckill/internal/testenv"
	"seckill/sale"
)

// aclPasswords are the test's passwords of deploy/redis/users.acl's users.
var aclPasswords = map[string]string{
	"edge": "edge0123456789abcdef0123456789abcdef", "engine": "engine0123456789abcdef0123456789abcd",
	"consumer": "consumer0123456789abcdef0123456789ab", "replica": "replica0123456789abcdef0123456789abc",
}

// aclRules are the user lines of deploy/redis/users.acl with the test's
// passwords filled in, as docker-compose's redis services fill theirs.
func aclRules(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/redis/users.acl")
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "user ") {
			continue
		}
		for u, p := range aclPasswords {
			l = strings.ReplaceAll(l, "{{"+u+"}}", p)
		}
		if strings.Contains(l, "{{") {
			t.Fatalf("a user without a test password: %s", l)
		}
		rules = append(rules, l)
	}
	return rules
}

// TestEachRoleWorksUnderItsACL runs a sale with the sidecar shape of
// docker-compose and deploy/k8s — `seckill edge` (with the admin API and
// the bookkeeping jobs), `seckill engine` beside it, `seckill consumer` —
// each under its own user of deploy/redis/users.acl on two Redis servers
// (default and hot shard): the activity is preheated, tickets on both
// shards become orders. Then each user is refused what its role never
// sends, directly and from inside a script.
func TestEachRoleWorksUnderItsACL(t *testing.T) {
	rules := aclRules(t)
	def := testenv.StartRedis(t, testenv.WithRedisACL(rules...))
	hot := testenv.StartRedis(t, testenv.WithRedisACL(rules...))
	kafka := testenv.StartKafka(t, 4)
	base := config.Default()
	base.Edge.Identity = "any"
	base.Log.Format = "console"
	base.Engine.Kafka.Brokers = kafka.Addrs
	base.Consumer.Brokers = kafka.Addrs
	base.Consumer.MaxWait = 10 * time.Millisecond
	base.Admin.Token = "test-admin-token"
	base.OrderSigning = testOrderSigning
	base.Store.Driver, base.Store.DSN = "sqlite", t.TempDir()+"/seckill.db"
	base.Edge.Rate.IPExempt = []string{"127.0.0.0/8"}
	base.Edge.RefreshInterval = 200 * time.Millisecond
	base.Engine.Listen = "unix://" + t.TempDir() + "/engine.sock"
	as := func(user string) config.Config {
		c := base
		c.Redis.Default = shard.Redis{Addrs: []string{def.Addr}, Username: user, Password: aclPasswords[user]}
		c.Redis.Hot = shard.HotShards{{Addrs: []string{hot.Addr}, Username: user, Password: aclPasswords[user]}}
		if err := c.Redis.CheckAuth(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	log := zaptest.NewLogger(t)

	eng, err := New(as("engine"), log.Named("engine"), Roles{Engine: true})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := engine.Listen(base.Engine.Listen)
	if err != nil {
		t.Fatal(err)
	}
	eng.Start(Listeners{Sidecar: ln})
	t.Cleanup(func() { eng.Shutdown(context.Background()) })

	ccfg := as("consumer")
	ccfg.Reconcile.Jobs = false // the edges run them (docker-compose, deploy/k8s)
	cons, err := New(ccfg, log.Named("consumer"), Roles{Consumer: true})
	if err != nil {
		t.Fatal(err)
	}
	cons.Start(Listeners{})
	t.Cleanup(func() { cons.Shutdown(context.Background()) })

	ecfg := as("edge")
	ecfg.Edge.Engine = base.Engine.Listen
	edge, err := New(ecfg, log.Named("edge"), Roles{Edge: true})
	if err != nil {
		t.Fatal(err)
	}
	edgeAddr, _ := serveSystem(t, edge)
	c := &cluster{sys: edge, base: "http://" + edgeAddr}

	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 990, LimitPerUser: 1},
		sale.SKU{ID: 1002, Stock: 10, Price: 1990, LimitPerUser: 1, Hot: true}))
	tickets := map[string]int64{}
	for _, sku := range []int64{1001, 1002} {
		for u := int64(1); u <= 3; u++ {
			user := sku*10 + u
			var a answer
			// The sidecar learns the activity at its next catalog refresh.
			testenv.EventuallyOK(t, fmt.Sprintf("user %d's ticket", user), 10*time.Second, func() error {
				if a = c.buy(t, sku, user); a.Status != 200 {
					return fmt.Errorf("%+v", a)
				}
				return nil
			})
			tickets[a.RequestNo] = user
		}
	}
	testenv.EventuallyOK(t, "every ticket's order", 30*time.Second, func() error {
		for rn, u := range tickets {
			if r := c.result(t, rn, u); r.Code != sale.ResultSuccess {
				return fmt.Errorf("ticket %s: %+v", rn, r)
			}
		}
		return nil
	})
	if r := do(t, "GET", c.base+"/api/v1/flash-sale/activities/1", 0, ""); r.Status != 200 {
		t.Fatalf("activity page: %+v", r)
	}

	// What each user is refused, on both servers.
	script := "return redis.call('SET', KEYS[1], '1')"
	everyone := [][]string{
		{"FLUSHALL"}, {"FLUSHDB"}, {"KEYS", "*"}, {"CONFIG", "SET", "appendonly", "no"}, {"CONFIG", "GET", "*"},
		{"ACL", "LIST"}, {"SHUTDOWN"}, {"REPLICAOF", "127.0.0.1", "1"}, {"MONITOR"},
		{"CLIENT", "KILL", "TYPE", "normal"}, {"SET", "other:key", "1"}, {"GET", "other:key"}, {"MIGRATE", "127.0.0.1", "1", "sk:acts", "0", "1"},
	}
	ledger := append([][]string{
		{"SET", sale.ActivityKey(1), "{}"}, {"DEL", sale.ActivityKey(1)}, {"SADD", sale.ActivitiesKey, "9"},
		{"ZADD", "sk:edges", "1e15", "forged"}, {"GET", "sk:tok:x"}, {"SET", "sk:tok:x", "1"}, {"SADD", "sk:block:users", "1"},
		{"EVAL", script, "1", sale.ActivityKey(1)}, {"SCAN", "0"},
	}, everyone...)
	for user, refused := range map[string][][]string{"engine": ledger, "consumer": ledger, "edge": everyone} {
		for _, r := range []*testenv.Redis{def, hot} {
			rc := userClient(t, r, user)
			for _, cmd := range refused {
				err := rc.Do(context.Background(), rc.B().Arbitrary(cmd...).Build()).Error()
				if err == nil || !strings.Contains(err.Error(), "NOPERM") {
					t.Errorf("%s on %s: %v: %v, want NOPERM", user, r.Addr, cmd, err)
				}
			}
		}
	}
	// The default user answers PING (health checks) and nothing else.
	nc, err := net.DialTimeout("tcp", def.Addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 256)
	for _, tc := range []struct{ send, want string }{
		{"PING\r\n", "+PONG"}, {"GET sk:acts\r\n", "-NOPERM"}, {"SMEMBERS sk:acts\r\n", "-NOPERM"},
	} {
		if _, err := nc.Write([]byte(tc.send)); err != nil {
			t.Fatal(err)
		}
		n, err := nc.Read(buf)
		if err != nil || !strings.HasPrefix(string(buf[:n]), tc.want) {
			t.Errorf("default user %q: %q %v, want %s", tc.send, buf[:n], err, tc.want)
		}
	}
}

// userClient is a client of r as one of deploy/redis/users.acl's users.
func userClient(t *testing.T, r *testenv.Redis, user string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr}, DisableCache: true,
		Username: user, Password: aclPasswords[user]})
	if err != nil {
		t.Fatalf("%s on %s: %v", user, r.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}
