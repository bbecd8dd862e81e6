package app

import (
	"testing"
	"time"

	"seckill/internal/sale"
)

// A buyer whose result Redis lost (restart without persistence) still reads
// how the ticket ended, from the database; nobody else can.
func TestResultSurvivesRedisLosingIt(t *testing.T) {
	c := startCluster(t, mode{driver: "sqlite"})
	c.preheat(t, openActivity(1, sale.SKU{ID: 1001, Stock: 10, Price: 100, LimitPerUser: 1}))
	a := c.buy(t, 1001, 77)
	if a.Status != 200 {
		t.Fatalf("buy: %+v", a)
	}
	deadline := time.Now().Add(15 * time.Second)
	for c.result(t, a.RequestNo, 77).Code != sale.ResultSuccess {
		if time.Now().After(deadline) {
			t.Fatal("no SUCCESS")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Redis forgets the result.
	if err := c.redis.Do(t, "DEL", sale.ResultKey(a.RequestNo)).Error(); err != nil {
		t.Fatal(err)
	}
	if r := c.result(t, a.RequestNo, 77); r.Code != sale.ResultSuccess || r.OrderNo != sale.OrderNo(a.RequestNo) {
		t.Fatalf("after Redis lost the result: %+v, want SUCCESS with the order from the database", r)
	}
	if r := c.result(t, a.RequestNo, 78); r.Status != 404 {
		t.Fatalf("another user reads the fallback: %+v", r)
	}
	if r := c.result(t, "385465232614494208", 77); r.Status != 404 {
		t.Fatalf("an unknown ticket: %+v", r)
	}
}
