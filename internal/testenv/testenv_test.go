package testenv

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestServersStart(t *testing.T) {
	r := StartRedis(t)
	if got := r.Do(t, "PING"); got.Error() != nil {
		t.Fatalf("PING: %v", got.Error())
	}
	k := StartKafka(t, 2)
	if len(k.Addrs) == 0 {
		t.Fatal("kfake has no listen address")
	}
	db, err := sql.Open("mysql", MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var one int
	if err := db.QueryRow("SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}

// A server started on a port another redis-server holds must not pass for
// ready: the test would share the other server's data.
func TestRedisStartOnATakenPortFails(t *testing.T) {
	a := StartRedis(t)
	b := &Redis{Dir: t.TempDir(), Port: a.Port}
	err := b.Start()
	b.Stop()
	if err == nil || !strings.Contains(err.Error(), "port") {
		t.Fatalf("Start on the port of %s: %v, want an error naming the port", a.Addr, err)
	}
	if got := a.Do(t, "PING"); got.Error() != nil {
		t.Fatalf("the first server: %v", got.Error())
	}
}

func TestInfoCPUAddsUserAndSysOnly(t *testing.T) {
	got, err := InfoCPU("# CPU\r\nused_cpu_sys:0.500000\r\nused_cpu_user:1.250000\r\nused_cpu_sys_children:9.0\r\nused_cpu_user_children:9.0\r\n")
	if err != nil || got != 1750*time.Millisecond {
		t.Fatalf("InfoCPU = %v, %v; want 1.75s", got, err)
	}
	if _, err := InfoCPU("# CPU\r\nused_cpu_sys_children:9.0\r\n"); err == nil {
		t.Fatal("an INFO cpu reply without used_cpu_user and used_cpu_sys read as a figure")
	}
}

func TestRedisCPUGrowsWithWork(t *testing.T) {
	r := StartRedis(t)
	before, err := RedisCPU(r.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c := r.Client(t)
	for i := range 5000 {
		if err := c.Do(context.Background(), c.B().Set().Key("k").Value(strconv.Itoa(i)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := RedisCPU(r.Addr)
	if err != nil || after <= before {
		t.Fatalf("CPU %v after 5,000 SETs, %v before (%v)", after, before, err)
	}
}

func TestCleanEnvDropsSeckillVariables(t *testing.T) {
	t.Setenv("SECKILL_EDGE_LISTEN", "127.0.0.1:1")
	t.Setenv("NOT_SECKILL_EDGE", "kept")
	env := strings.Join(CleanEnv(), "\n")
	if strings.Contains(env, "SECKILL_EDGE_LISTEN=") || !strings.Contains(env, "NOT_SECKILL_EDGE=kept") {
		t.Fatalf("CleanEnv kept a SECKILL_ variable or dropped another:\n%s", env)
	}
}
