package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the store of seckill dev

	"seckill/bench/benchkit"
	"seckill/e2e/chaos"
)

// skuStock is what the soak reads of the admin stock report's line of a
// SKU (GET /admin/v1/activities/{id}/stock).
type skuStock struct {
	SKUID     int64 `json:"skuId"`
	Initial   int64 `json:"initial"`
	Remaining int64 `json:"remaining"`
	Occupied  int64 `json:"occupied"`
	Ordered   int64 `json:"ordered"`
	Orders    int64 `json:"orders"`
	Drift     int64 `json:"drift"`
}

// books waits until every ticket of the sale is an order (at most
// timeout), then checks them in the real stores: the stock report adds up
// (ordered + occupied + remaining = initial, nothing oversold), the
// orders in SQLite are one per buyer and per requestNo and as many as the
// stock report counts, and they are the 200 answers wrk counted plus at
// most the answers it never counted (sent − answered of soak.lua, and the
// seed script's one buyer).
func books(admin benchkit.Admin, data string, accepted, uncounted int64, timeout time.Duration) (string, error) {
	var rep struct {
		SKUs []skuStock `json:"skus"`
	}
	deadline := time.Now().Add(timeout)
	for {
		if err := admin.Call("GET", "/admin/v1/activities/1/stock", nil, &rep); err != nil {
			return "", fmt.Errorf("stock report: %w", err)
		}
		if len(rep.SKUs) != 1 {
			return "", fmt.Errorf("stock report: %d SKUs, want 1", len(rep.SKUs))
		}
		if rep.SKUs[0].Occupied == 0 {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("%d tickets still without an order %v after the sale", rep.SKUs[0].Occupied, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	k := rep.SKUs[0]
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "seckill.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	var n, buyers, requestNos int64
	if err := db.QueryRowContext(context.Background(), `SELECT COUNT(*),
		(SELECT COUNT(*) FROM (SELECT DISTINCT activity_id, sku_id, user_id FROM seckill_order) AS d),
		COUNT(DISTINCT request_no) FROM seckill_order`).Scan(&n, &buyers, &requestNos); err != nil {
		return "", fmt.Errorf("count the orders in SQLite: %w", err)
	}
	line := fmt.Sprintf("books: stock report orders %d (units %d), occupied %d, remaining %d of %d, drift %d; SQLite %d orders, %d buyers, %d requestNos; wrk 200 answers %d (+%d not counted)",
		k.Orders, k.Ordered, k.Occupied, k.Remaining, k.Initial, k.Drift, n, buyers, requestNos, accepted, uncounted)
	var bad []string
	if k.Drift != 0 || k.Ordered+k.Occupied+k.Remaining != k.Initial {
		bad = append(bad, "the stock report does not add up")
	}
	if k.Ordered > k.Initial {
		bad = append(bad, "OVERSOLD")
	}
	if n != k.Orders || buyers != n || requestNos != n {
		bad = append(bad, "the orders are not one per buyer and requestNo, as many as the report counts")
	}
	if n < accepted || n > accepted+uncounted {
		bad = append(bad, "the orders are not the accepted tickets")
	}
	if len(bad) > 0 {
		return line + "\n", fmt.Errorf("%s: %s", line, strings.Join(bad, "; "))
	}
	return line + "\n", nil
}

// checkBooks verifies the sale's books once the crowd has stopped, with
// the fault suite's checker: every unit the SKU ever had (its stock plus
// every restock) is in Redis, held by an occupancy or in an order; Redis
// and the snapshot agree; at most one live order per buyer; no result left
// QUEUING. It waits up to a minute for the consumer to write the last
// orders. The SKU is hot, so it lives on dev's hot redis-server.
func checkBooks(data string, redis [2]string, sku, initial int64) (string, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "seckill.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return "", err
	}
	defer db.Close()
	src := chaos.Books{DB: db, Redis: []string{redis[0]}, Shards: map[int64]string{sku: redis[1]}}
	vs, notes, err := chaos.AwaitBooks(src, map[int64]int64{sku: initial}, time.Minute)
	var b strings.Builder
	for _, v := range vs {
		mark := "ok"
		if !v.OK {
			mark = "FAILED"
		}
		fmt.Fprintf(&b, "  [%s] %s: %s\n", mark, v.Name, v.Detail)
	}
	for _, n := range notes {
		fmt.Fprintf(&b, "  [note] %s\n", n)
	}
	return b.String(), err
}
