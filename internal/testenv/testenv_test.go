package testenv

import (
	"database/sql"
	"strings"
	"testing"
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
