package app

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
	"seckill/sale"
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
	testenv.Eventually(t, "the buy's SUCCESS", 15*time.Second, func() bool {
		return c.result(t, a.RequestNo, 77).Code == sale.ResultSuccess
	})
	// Redis forgets the result.
	if err := c.redis.Do(t, "HDEL", sale.ResultsKey(1, 1001), a.RequestNo).Error(); err != nil {
		t.Fatal(err)
	}
	// The record still names the ticket, claimed: QUEUING until the
	// database answers. The polls above may have spent the buyer's
	// database reads (edge.db_reads_per_user); such a poll answers
	// QUEUING with Retry-After, and a later one the order.
	var r answer
	testenv.Eventually(t, "SUCCESS from the database", 10*time.Second, func() bool {
		r = c.result(t, a.RequestNo, 77)
		return r.Code != sale.ResultQueuing
	})
	if r.Code != sale.ResultSuccess || r.OrderNo != testenv.OrderNo(a.RequestNo) || !testenv.OrderNoPattern.MatchString(r.OrderNo) {
		t.Fatalf("after Redis lost the result: %+v, want SUCCESS with the order from the database", r)
	}
	if r := c.result(t, a.RequestNo, 78); r.Status != 404 {
		t.Fatalf("another user reads the fallback: %+v", r)
	}
	// The buyer page's result stream falls back the same way.
	if status, body := stream(t, c.base+"/api/v1/flash-sale/result/"+a.RequestNo+"/events", 77); status != 200 ||
		!strings.Contains(body, `"code":"SUCCESS"`) || !strings.Contains(body, testenv.OrderNo(a.RequestNo)) {
		t.Fatalf("the stream after Redis lost the result: %d %s", status, body)
	}
	if status, _ := stream(t, c.base+"/api/v1/flash-sale/result/"+a.RequestNo+"/events", 78); status != 404 {
		t.Fatalf("another user's stream of the fallback: %d", status)
	}
	if r := c.result(t, "1-1001-385465232614494208", 77); r.Status != 404 {
		t.Fatalf("an unknown ticket: %+v", r)
	}
}

// stream reads a result stream to its end (it ends after a final state).
func stream(t *testing.T, url string, user int64) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("X-User-Id", strconv.FormatInt(user, 10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
