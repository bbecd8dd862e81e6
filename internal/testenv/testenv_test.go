package testenv

import (
	"database/sql"
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
