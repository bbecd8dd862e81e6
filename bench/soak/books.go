package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the store of seckill dev

	"seckill/e2e/chaos"
)

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
