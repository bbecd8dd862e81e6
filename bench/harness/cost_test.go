package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestParseCommandStats(t *testing.T) {
	m := parseCommandStats("# Commandstats\r\ncmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=3,usec_per_call=1.50,rejected_calls=0,failed_calls=0\r\n")
	if len(m) != 2 || m["evalsha"] != (cmdStat{12, 340}) || m["client|setinfo"] != (cmdStat{2, 3}) {
		t.Fatalf("%+v", m)
	}
}

// TestCostCountsTheCommandsOfTheWindow runs known commands on a real
// redis-server between two snapshots: the row shows exactly them per
// buyer (commands run by a script included, the harness' own INFO not).
func TestCostCountsTheCommandsOfTheWindow(t *testing.T) {
	r := testenv.StartRedis(t)
	c := r.Client(t)
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ws := []watched{{role: roleServer, pid: os.Getpid()}, {role: roleRedisDef, pid: os.Getpid(), redis: r.Addr}}
	m := measure(ws)
	for i := range 10 {
		if err := c.Do(ctx, c.B().Set().Key("k"+strings.Repeat("x", i)).Value("v").Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	script := "redis.call('INCR', KEYS[1]); redis.call('INCR', KEYS[1]); return redis.call('INCR', KEYS[1])"
	if err := c.Do(ctx, c.B().Eval().Script(script).Numkeys(1).Key("n").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got := m.done("test", "", 5)
	if !got.ok() {
		t.Fatalf("not measured: %s", got.note)
	}
	cmds := got.cmds[roleRedisDef]
	if cmds["set"].calls != 10 || cmds["eval"].calls != 1 || cmds["incr"].calls != 3 {
		t.Fatalf("commands %+v, want set 10, eval 1, incr 3", cmds)
	}
	if _, ok := cmds["info"]; ok {
		t.Fatalf("the harness' own INFO is counted: %+v", cmds)
	}
	calls, scripts := got.redisPerBuyer(roleRedisDef)
	if want := float64(14+others(cmds)) / 5; calls != want || scripts != 0.2 {
		t.Fatalf("calls per buyer %v, want %v; script calls %v, want 0.2", calls, want, scripts)
	}
	if s := got.commands(roleRedisDef); !strings.HasPrefix(s, "set 2 (") || !strings.Contains(s, "incr 0.6 (") {
		t.Fatalf("per command: %s", s)
	}
}

// others counts calls of commands the test did not send itself (a client
// library's keep-alive, say).
func others(m map[string]cmdStat) int64 {
	var n int64
	for k, v := range m {
		if k != "set" && k != "eval" && k != "incr" {
			n += v.calls
		}
	}
	return n
}

// TestCostPerBuyerArithmetic: differences of two snapshots, divided by the
// accepted buyers; scans as a share of the redis-servers' CPU.
func TestCostPerBuyerArithmetic(t *testing.T) {
	at := time.Now()
	a := snapshot{at: at, cpu: map[string]time.Duration{roleServer: time.Second, roleRedisDef: 0, roleRedisHot: 0},
		cmds: map[string]map[string]cmdStat{roleRedisDef: {"hscan": {1, 10}, "info": {3, 30}}, roleRedisHot: {}}}
	b := snapshot{at: at.Add(2 * time.Second), cpu: map[string]time.Duration{roleServer: 3 * time.Second, roleRedisDef: 800 * time.Millisecond, roleRedisHot: 200 * time.Millisecond},
		cmds: map[string]map[string]cmdStat{roleRedisDef: {"hscan": {11, 20_010}, "evalsha": {1000, 9000}, "info": {4, 40}}, roleRedisHot: {"evalsha": {10, 500}}}}
	c := costBetween("x", "", a, b, 1000)
	if c.window != 2*time.Second || c.perBuyer(roleServer) != 2000 || c.perBuyer(roleRedisDef, roleRedisHot) != 1000 || c.perBuyer() != 3000 {
		t.Fatalf("per buyer: server %v, redis %v, all %v", c.perBuyer(roleServer), c.perBuyer(roleRedisDef, roleRedisHot), c.perBuyer())
	}
	if _, ok := c.cmds[roleRedisDef]["info"]; ok {
		t.Fatal("the harness' INFO is counted")
	}
	calls, scripts := c.redisPerBuyer(roleRedisDef, roleRedisHot)
	if calls != 1.02 || scripts != 1.01 {
		t.Fatalf("calls %v, script calls %v per buyer", calls, scripts)
	}
	// 20,000 µs of HSCAN over 1 s of Redis CPU.
	if s, ok := c.scanShare(roleRedisDef, roleRedisHot); !ok || s != 0.02 {
		t.Fatalf("scan share %v %v", s, ok)
	}
}
